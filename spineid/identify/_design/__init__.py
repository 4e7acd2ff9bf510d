"""Before and around a fit: experiment design (discrete and continuous), its validation by
repeated fits, the linearity check, and posteriors."""
