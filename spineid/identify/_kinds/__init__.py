"""The fit kinds other than trajectories: load laws (with the breakpoint search), stiffness
matrices, motion segments and a spine's levels."""
