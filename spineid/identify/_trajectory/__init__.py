"""Trajectory fits: the problem, the residual objective (single and multiple shooting), the run
that the solvers drive, `fit`, its result and batches of fits."""
