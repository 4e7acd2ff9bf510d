"""Measure recovery: a stiffness measure (atoms of springs) recovered from trajectories by
conditional gradients and a projected Levenberg-Marquardt."""
