"""Write `datasets/neck_bushings.osim`, the bundled OpenSim model of the examples: three
cervical levels (C7, C6, C5 on a fixed T1) on CustomJoints, each level's passive mechanics a
BushingForce, written by OpenSim itself (the `opensim` package, PyPI `opensim`). The numbers are
illustrative (masses 0.24-0.3 kg, rotational stiffness 2.5-5 N m/rad, damping 0.02-0.03
N m s/rad), not a published neck: the file is for learning the workflow (README, notebook 10,
docs/formats/opensim.md) and for tests/test_osim_models.py, which builds its models here too.

    python experiments/make_neck_osim.py
"""

import pathlib


def _vec(osim, values):
    return osim.Vec3(*map(float, values))


def _body(osim, model, name, mass, centre, inertia):
    body = osim.Body(name, mass, _vec(osim, centre), osim.Inertia(*map(float, inertia)))
    model.addBody(body)
    return body


def _axis(osim, transform, index, coordinate, function, axis):
    # (set_function copies the function; setFunction would take it over from Python.)
    transform_axis = transform.updTransformAxis(index)
    if coordinate is not None:
        transform_axis.setCoordinateNames(osim.ArrayStr(coordinate, 1))
    transform_axis.set_function(function)
    transform_axis.setAxis(_vec(osim, axis))


def _spline(osim, points):
    spline = osim.SimmSpline()
    for x, y in points:
        spline.addPoint(float(x), float(y))
    return spline


MARKERS = {"anterior": (0.018, 0.01, 0.0), "posterior": (-0.025, 0.012, 0.0),
           "left": (0.0, 0.009, -0.02)}
"""The markers on each vertebra (body axes, m), `<vertebra>_<side>` in the MarkerSet."""


def neck_model(osim, folder: pathlib.Path, levels: int = 3, locked: bool = True,
               coupled: bool = True, names: tuple[str, ...] | None = None,
               file_name: str = "small_neck.osim") -> pathlib.Path:
    """A small cervical-like chain: `levels` vertebrae of 0.2-0.3 kg on CustomJoints of three
    rotations (flexion-extension about z, lateral bending about x, axial rotation about y, as
    OpenSim's neck models name them), each level's bushing between offset frames at the joint
    centre, gravity along -y, the head's start tilted forward. With `locked`, the top level's
    axial rotation is locked; with `coupled`, the lowest level's lateral bending follows its
    flexion through a CoordinateCouplerConstraint (a LinearFunction). Realistic masses,
    inertias, stiffness and damping: its motion is a damped oscillation, for comparing
    simulations over a second. `names`: the vertebrae bottom up (default `v1, v2, ...`, joints
    `joint_<k>`, bushings `bushing_<k>`); named, joints and bushings are named after the two
    levels they join (`T1_C7`, `T1_C7_bushing`), the base being `T1`. Each vertebra carries
    the three `MARKERS`."""
    model = osim.Model()
    model.setName(pathlib.Path(file_name).stem)
    model.setGravity(osim.Vec3(0.0, -9.80665, 0.0))
    parent = model.getGround()
    named = names is not None
    names = tuple(names) if named else tuple(f"v{k + 1}" for k in range(levels))
    for level in range(levels):
        name = names[level]
        below = names[level - 1] if level else "T1"
        joint_name = f"{below}_{name}" if named else f"joint_{level + 1}"
        mass = 0.3 - 0.03 * level
        body = _body(osim, model, name, mass, (0.01, 0.008, 0.0),
                     (4e-4, 6e-4, 5e-4, 2e-5, 0.0, -1e-5))
        transform = osim.SpatialTransform()
        prefix = f"{name}_"
        _axis(osim, transform, 0, prefix + "flexion", osim.LinearFunction(1.0, 0.0), (0, 0, 1))
        _axis(osim, transform, 1, prefix + "bending", osim.LinearFunction(1.0, 0.0), (1, 0, 0))
        _axis(osim, transform, 2, prefix + "rotation", osim.LinearFunction(1.0, 0.0),
              (0, 1, 0))
        _axis(osim, transform, 3, prefix + "flexion",
              _spline(osim, [(-0.6, -0.002), (-0.2, -0.0005), (0.0, 0.0), (0.3, 0.0012),
                             (0.6, 0.0021)]), (1, 0, 0))
        above = (0.0, 0.02, 0.0) if level else (0.0, 0.05, 0.0)
        joint = osim.CustomJoint(joint_name, parent, _vec(osim, above),
                                 _vec(osim, (0, 0, 0)), body, _vec(osim, (0.0, -0.008, 0.0)),
                                 _vec(osim, (0, 0, 0)), transform)
        model.addJoint(joint)
        bushing = osim.BushingForce(
            f"{joint_name}_bushing" if named else f"bushing_{level + 1}", parent,
            osim.Transform(_vec(osim, above)), body,
            osim.Transform(_vec(osim, (0.0, -0.008, 0.0))),
            _vec(osim, (1e4, 1e4, 1e4)),
            _vec(osim, (3.0 + 0.5 * level, 2.5, 4.0 - 0.3 * level)),
            _vec(osim, (10.0, 10.0, 10.0)), _vec(osim, (0.03, 0.02, 0.025)))
        # (argument order: translational then rotational stiffness, then the dampings)
        model.addForce(bushing)
        for side, location in MARKERS.items():
            model.addMarker(osim.Marker(f"{name}_{side}", body, _vec(osim, location)))
        parent = body
    model.finalizeConnections()
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    coordinates.get(f"{names[-1]}_flexion").setDefaultValue(0.25)
    coordinates.get(f"{names[0]}_rotation").setDefaultValue(-0.1)
    if locked:
        coordinates.get(f"{names[-1]}_rotation").setDefaultLocked(True)
    if coupled:
        coupler = osim.CoordinateCouplerConstraint()
        coupler.setName("bending_follows_flexion")
        coupler.setIndependentCoordinateNames(osim.ArrayStr(f"{names[0]}_flexion", 1))
        coupler.setDependentCoordinateName(f"{names[0]}_bending")
        function = osim.LinearFunction(0.3, 0.0)
        coupler.setFunction(function)
        model.addConstraint(coupler)
    del state
    model.finalizeConnections()
    path = folder / file_name
    model.printToXML(str(path))
    return path




def main() -> None:
    import opensim

    folder = pathlib.Path(__file__).resolve().parents[1] / "datasets"
    path = neck_model(opensim, folder, levels=3, names=("C7", "C6", "C5"),
                      file_name="neck_bushings.osim")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
