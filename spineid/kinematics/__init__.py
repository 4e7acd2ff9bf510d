"""Kinematics: rotations and 1-2-3 Euler angles, planar body points, frames fixed in bodies
and the relative motion of two frames, and the contact geometry of cylinder end faces."""

from ._contact_geometry import (
    blended_contact as blended_contact,
    blending_factor as blending_factor,
    CONTACT_CASES as CONTACT_CASES,
    ContactGeometry as ContactGeometry,
    flat_contact as flat_contact,
    FlatContact as FlatContact,
    skew_contact as skew_contact,
)
from ._frames import (
    bushing_deflection as bushing_deflection,
    bushing_deflection_rate as bushing_deflection_rate,
    bushing_wrenches as bushing_wrenches,
)
from ._functions import (
    AbstractCoordinateFunction as AbstractCoordinateFunction,
    Constant as Constant,
    LinearFunction as LinearFunction,
    MultiplierFunction as MultiplierFunction,
    MultivariatePolynomial as MultivariatePolynomial,
    multivariate_exponents as multivariate_exponents,
    NaturalCubicSpline as NaturalCubicSpline,
    PiecewiseLinearFunction as PiecewiseLinearFunction,
    PolynomialFunction as PolynomialFunction,
    SimmSpline as SimmSpline,
)
from ._markers import (
    body_coordinates as body_coordinates,
    relative_poses as relative_poses,
    rigid_poses as rigid_poses,
)
from ._planar import (
    body_point_position as body_point_position,
    body_point_velocity as body_point_velocity,
    rotation_matrix as rotation_matrix,
    to_body_coordinates as to_body_coordinates,
)
from ._rotations import (
    angular_velocity as angular_velocity,
    dual_euler_basis as dual_euler_basis,
    E_T as E_T,
    E_W as E_W,
    e_T as e_T,
    e_W as e_W,
    euler123_angles as euler123_angles,
    euler123_rotation as euler123_rotation,
    euler_basis as euler_basis,
    relative_motion as relative_motion,
    RelativeMotion as RelativeMotion,
)
