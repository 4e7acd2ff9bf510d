"""What every fit kind shares: the objective interface, the failed-solve rule, the noise
convention and its estimate, padding, spineid's Levenberg-Marquardt, parameter transforms, the
Fisher analysis, the verdict, profiles and the result bases."""
