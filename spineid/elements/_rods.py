"""Implant rods as chains of linear bushings: each straight segment of an elastic rod between
two clamps (the heads of the screws or hooks that hold it) is one `Bushing` whose two frames
sit at the segment's midpoint.

A prismatic Euler-Bernoulli beam of length `L`, clamped at both ends, resists a motion of one
end relative to the other with the end forces of the standard beam element (Przemieniecki,
Theory of Matrix Structural Analysis, 1968, ch. 5). Referred to the midpoint, the coupling
between shear and bending of that element vanishes, so the relative motion of the two
midpoint frames (one carried by each clamp) meets the diagonal stiffness of `rod_stiffness`:
for a shear `v` at the midpoint and a relative rotation `theta`, the element's energy
`6 EI/L^3 (v + theta L/2)^2 - 6 EI/L^2 (v + theta L/2) theta + 2 EI/L theta^2` is
`6 EI/L^3 v^2 + EI/(2 L) theta^2`. The bushing is this beam exactly for small deflections
(tests compare it with a beam element written independently) and a geometrically consistent
large-rotation extension of it beyond.
"""

import math

import numpy as np

from ._bushings import Bushing


ROD_MATERIALS = {
    "titanium": (110e9, 0.34),
    "cobalt_chrome": (210e9, 0.29),
    "stainless_steel": (193e9, 0.30),
}
"""Young's modulus (Pa) and Poisson's ratio of common rod alloys: Ti-6Al-4V (ASTM F136),
Co-28Cr-6Mo (ASTM F1537), 316L stainless steel (ASTM F138); handbook values."""


def rod_material(material) -> tuple[float, float]:
    """`(E, nu)` (Pa, -) of `material`: a name of `ROD_MATERIALS` or a pair of numbers."""
    if isinstance(material, str):
        if material not in ROD_MATERIALS:
            raise ValueError(f"rod material {material!r}: expected one of "
                             f"{list(ROD_MATERIALS)} or a pair (Young's modulus in Pa, "
                             "Poisson's ratio)")
        return ROD_MATERIALS[material]
    try:
        modulus, poisson = (float(v) for v in material)
    except (TypeError, ValueError):
        raise ValueError(f"rod material {material!r}: expected a name of ROD_MATERIALS or "
                         "(Young's modulus in Pa, Poisson's ratio)") from None
    if not modulus > 0 or not -1 < poisson < 0.5:
        raise ValueError(f"rod material {material!r}: Young's modulus must be > 0 Pa and "
                         "Poisson's ratio within (-1, 0.5)")
    return modulus, poisson


def rod_stiffness(length: float, diameter: float, material="titanium") -> np.ndarray:
    """The `(6, 6)` diagonal stiffness (N/m, N m/rad) of a clamped-clamped round rod segment of
    `length` and `diameter` (m) referred to its midpoint, in axes with e2 along the rod
    (module docstring): `[12 EI/L^3, EA/L, 12 EI/L^3, EI/L, GJ/L, EI/L]` with `I = pi d^4 /
    64`, `J = 2 I`, `A = pi d^2 / 4`, `G = E / (2 (1 + nu))`."""
    if not length > 0 or not diameter > 0:
        raise ValueError(f"rod segment: length {length!r} and diameter {diameter!r} must be "
                         "> 0 m")
    modulus, poisson = rod_material(material)
    area, inertia = math.pi * diameter**2 / 4, math.pi * diameter**4 / 64
    shear_modulus = modulus / (2 * (1 + poisson))
    bending, shear = modulus * inertia / length, 12 * modulus * inertia / length**3
    return np.diag([shear, modulus * area / length, shear, bending,
                    shear_modulus * 2 * inertia / length, bending])


def rod_segment(frame1, frame2, length: float, diameter: float, material="titanium"
                ) -> Bushing:
    """A rod segment as a classic `Bushing` (no damping): `frame1` and `frame2` (each
    `(position (3,), 1-2-3 Euler angles (3,))` in the lower and the upper body's coordinates,
    m and rad) are the segment's midpoint frame, e2 along the rod, as each clamp carries it;
    they coincide when the rod is at rest. Stiffness from `rod_stiffness`."""
    return Bushing.create("classic", frame1, frame2,
                          rod_stiffness(length, diameter, material), np.zeros((6, 6)),
                          np.zeros(6), np.zeros(6))
