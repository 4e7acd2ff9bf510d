"""MEBDF (`spineid.MEBDF`, Cash's modified extended BDF) against diffrax's Kvaerno solvers and
scipy's stiff integrators: accuracy, steps and wall time.

Part `stiff`: four stiff test problems (three of Hairer and Wanner's test set), each integrated
by `spineid.MEBDF` (its chord iteration a hundred times tighter; jit-compiled, timed warm; its
order varied, 1-4 (the default), with its Jacobian reused across steps and with a fresh one
every step, and how many its accepted steps took; the order fixed at 4, and varied 1-5 and
fixed at 5, with the accepted steps at each order) and by scipy's `BDF` and `Radau` (timed as
they run, their Jacobian by finite differences as a lab would call them), all at the same
tolerance, against scipy's `Radau` at
`rtol = 1e-12` as the reference (the stiff oscillator: its exact solution): the largest error
at the end relative to the reference (`atol` the problem's own scale), accepted steps and
seconds.

- Robertson's chemical kinetics to t = 40 (3 species, rate constants 0.04, 1e4, 3e7);
- van der Pol's oscillator with mu = 1000, `y'' = mu (1 - y^2) y' - y`, to t = 3000 (about
  1.5 relaxation periods);
- HIRES, the plant-physiology problem of Schaefer (8 species) to t = 321.8122;
- a stiff oscillator: a mode of eigenvalues -1 +- 200i driven by sin t beside a slow mode
  driven by cos t, to t = 50 (its stiff eigenvalues next to the imaginary axis, where the
  BDF family of high order loses stability).

Part `whiplash`: the head-neck chain (datasets/head_neck.toml) through its rear-end pulse to
5 s, as `spineid whiplash --integrator NAME` runs it (`spineid.whiplash_study`, rtol 1e-5):
steps, warm seconds, the peak relative kinetic energy - work error e_R (eqs 49-55; the paper's
MEBDFV run reports 0.0103) and the largest difference of the head's position (relative to T1)
from Kvaerno5's at rtol 1e-9.

Part `fit`: a trajectory fit through each integrator (`FitProblem(simulation_solver=...)`): the
bundled four-axial-spring pair (datasets/axial_4_springs.toml), 0.2 s at 1 kHz simulated by
Tsit5 with every stiffness 25% above the file's and white tracking noise (5 um, 5 um, 0.01
degree) added, its four stiffnesses fitted from the file's values by spineid's
Levenberg-Marquardt (`lm`) with the noise given: seconds of the first fit (with its
compilation) and of a second on the same problem (warm), solver steps, and the largest
difference of the values from the Tsit5 fit's in its standard errors.

Run: `python experiments/integrators.py [--part stiff|whiplash|fit|all] [--rtol 1e-6]`. The
measured tables are in docs/performance.md (and in words in docs/validation.md).
"""

import argparse
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import spineid


def robertson(t, y, args=None):
    """Robertson's kinetics `(3,)`."""
    return jnp.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                      0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2])


def van_der_pol(t, y, args=None):
    """Van der Pol's oscillator with mu = 1000, `(y, y')`."""
    return jnp.array([y[1], 1000.0 * (1.0 - y[0] ** 2) * y[1] - y[0]])


def hires(t, y, args=None):
    """HIRES `(8,)` (Hairer and Wanner, section IV.10)."""
    return jnp.array([
        -1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
        1.71 * y[0] - 8.75 * y[1],
        -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
        8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
        -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
        -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
        280.0 * y[5] * y[7] - 1.81 * y[6],
        -280.0 * y[5] * y[7] + 1.81 * y[6]])


def oscillator(t, y, args=None):
    """The stiff oscillator `(3,)`: a damped mode of frequency 200 rad/s driven by `sin t`, and
    a slow mode driven by `cos t`."""
    return jnp.array([-y[0] - 200.0 * y[1] + jnp.sin(t), 200.0 * y[0] - y[1],
                      -y[2] + jnp.cos(t)])


def oscillator_exact(t):
    """The stiff oscillator's exact solution `(3,)` at `t` from `(1, 0, 0)`: the driven mode as
    the complex `z = y_0 + i y_1`, `z' = (-1 + 200 i) z + sin t`, free part and the particular
    solution of `sin t = (e^(it) - e^(-it)) / 2i`; the slow mode `(cos t + sin t - e^-t) / 2`."""
    rate = -1.0 + 200.0j

    def driven(t):
        return (np.exp(1j * t) / (1j - rate) - np.exp(-1j * t) / (-1j - rate)) / 2j

    z = (1.0 - driven(0.0)) * np.exp(rate * t) + driven(t)
    return np.array([z.real, z.imag, (np.cos(t) + np.sin(t) - np.exp(-t)) / 2])


PROBLEMS = {
    # name: (vector field, start, end time, absolute tolerance (the problem's scale))
    "Robertson": (robertson, np.array([1.0, 0.0, 0.0]), 40.0, 1e-10),
    "van der Pol (mu 1000)": (van_der_pol, np.array([2.0, 0.0]), 3000.0, 1e-8),
    "HIRES": (hires, np.array([1.0, 0, 0, 0, 0, 0, 0, 0.0057]), 321.8122, 1e-10),
    "stiff oscillator": (oscillator, np.array([1.0, 0.0, 0.0]), 50.0, 1e-10),
}


def reference(problem, rtol=1e-12):
    """The end state of `problem` (a `PROBLEMS` entry) by scipy's Radau at `rtol`, with the
    exact Jacobian (JAX)."""
    f, y0, t_end, atol = problem
    jacobian, field = jax.jit(jax.jacfwd(lambda y: f(0.0, y))), jax.jit(f)
    return solve_ivp(lambda t, y: np.asarray(field(t, y)), (0.0, t_end), y0, method="Radau",
                     rtol=rtol, atol=atol * rtol * 1e8,
                     jac=lambda t, y: np.asarray(jacobian(y))).y[:, -1]


def mebdf_solve(problem, rtol, reuse_jacobian=True, min_order=1, max_order=4):
    """`problem` integrated by `spineid.MEBDF` at `rtol` (its chord iteration a hundred times
    tighter; `reuse_jacobian`, `min_order` and `max_order` its options): a jitted function of
    nothing that returns `(end state, accepted steps, Jacobians taken, accepted steps at each
    order)`."""
    f, y0, t_end, atol = problem
    solver = spineid.MEBDF(max_order=max_order, min_order=min_order, rtol=rtol / 100,
                           atol=atol / 100, reuse_jacobian=reuse_jacobian)

    @jax.jit
    def run():
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(f), solver, 0.0, t_end, 1e-6, jnp.asarray(y0),
            saveat=diffrax.SaveAt(t1=True, solver_state=True),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol), max_steps=200_000)
        state = solution.solver_state
        return (solution.ys[-1], solution.stats["num_accepted_steps"], state.n_jacobians,
                state.order_counts)

    return run


def stiff_part(rtol):
    print(f"{'problem':22s} {'integrator':16s} {'error':>9s} {'steps':>7s} {'seconds':>8s} "
          "Jacobians, steps at orders 1, 2, ...")
    for name, problem in PROBLEMS.items():
        f, y0, t_end, atol = problem
        exact = oscillator_exact(t_end) if f is oscillator else reference(problem)
        scale = atol + np.abs(exact)

        def line(integrator, end, steps, seconds, jacobians="", orders=None):
            error = np.max(np.abs(np.asarray(end) - exact) / scale)
            counts = "" if orders is None else " " + "/".join(str(int(c)) for c in orders)
            print(f"{name:22s} {integrator:16s} {error:9.2e} {int(steps):7d} {seconds:8.3f} "
                  f"{jacobians}{counts}", flush=True)

        for label, reuse, orders in (("MEBDF", True, (1, 4)), ("MEBDF (fresh J)", False, (1, 4)),
                                     ("MEBDF order 4", True, (4, 4)),
                                     ("MEBDF 1-5", True, (1, 5)),
                                     ("MEBDF order 5", True, (5, 5))):
            run = mebdf_solve(problem, rtol, reuse, *orders)
            jax.block_until_ready(run())  # (compiled)
            clock = time.perf_counter()
            end, steps, jacobians, counts = jax.block_until_ready(run())
            line(label, end, steps, time.perf_counter() - clock, int(jacobians), counts)
        numpy_f = jax.jit(lambda t, y: f(t, y))
        for method in ("BDF", "Radau"):
            clock = time.perf_counter()
            solution = solve_ivp(lambda t, y: np.asarray(numpy_f(t, y)), (0.0, t_end), y0,
                                 method=method, rtol=rtol, atol=atol)
            line(f"scipy {method}", solution.y[:, -1], solution.t.size - 1,
                 time.perf_counter() - clock)


def whiplash_part():
    chain = spineid.load_model_file(spineid.dataset_path("head_neck.toml")).model
    exact = spineid.whiplash_study(chain, 5.0, solver=diffrax.Kvaerno5(), rtol=1e-9,
                                   max_steps=2_000_000)
    print(f"{'integrator':16s} {'steps':>6s} {'warm s':>7s} {'peak e_R':>9s} "
          f"{'head vs tight':>14s}")
    for name, solver in (("Kvaerno4", diffrax.Kvaerno4()), ("Kvaerno5", diffrax.Kvaerno5()),
                         ("MEBDF", spineid.MEBDF(rtol=1e-7, atol=1e-9)),
                         ("MEBDF (fresh J)", spineid.MEBDF(rtol=1e-7, atol=1e-9,
                                                          reuse_jacobian=False)),
                         ("MEBDF order 4", spineid.MEBDF(min_order=4, rtol=1e-7, atol=1e-9)),
                         ("MEBDF 1-5", spineid.MEBDF(max_order=5, rtol=1e-7, atol=1e-9))):
        study = spineid.whiplash_study(chain, 5.0, solver=solver, rtol=1e-5)
        summary = study.summary()
        difference = np.max(np.abs(np.asarray(study.head) - np.asarray(exact.head)))
        print(f"{name:16s} {summary['n_steps']:6d} {study.seconds:7.2f} "
              f"{summary['peak_relative_error_e_R']:9.2e} {1e3 * difference:11.2e} mm",
              flush=True)
    print("(the paper's MEBDFV run: e_R 0.0103)")


def fit_part():
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = np.linspace(0.0, 0.2, 201)
    channels, sd = ("x", "y", "theta"), {"x": 5e-6, "y": 5e-6, "theta": 1.7453e-4}
    probe = spineid.FitProblem(model_file, spineid.Measurement(ts, np.zeros((201, 3)), channels),
                               ["stiffness"], sd)
    model = spineid.apply_values(model_file.model, probe.parameters,
                                 jnp.asarray(1.25 * probe.start))
    observed = np.array([model.observe(q) for q in spineid.simulate(model, ts).q])
    observed += np.random.default_rng(5).normal(size=observed.shape) * np.array(
        [sd[c] for c in channels])
    measurement = spineid.Measurement(ts, observed, channels)
    print(f"{'integrator':10s} {'first s':>8s} {'warm s':>7s} {'steps':>5s} "
          f"{'vs Tsit5 (SE)':>14s}")
    reference = None
    for name, solver in (("Tsit5", None), ("Kvaerno4", diffrax.Kvaerno4()),
                         ("Kvaerno5", diffrax.Kvaerno5()),
                         ("MEBDF", spineid.MEBDF(rtol=1e-10, atol=1e-12))):
        seconds = []
        for _ in range(2):
            problem = spineid.FitProblem(model_file, measurement, ["stiffness"], sd,
                                         simulation_solver=solver)
            clock = time.perf_counter()
            result = spineid.fit(problem, "lm")
            seconds.append(time.perf_counter() - clock)
        reference = result if reference is None else reference
        shift = np.max(np.abs(result.values - reference.values) / reference.stderr)
        print(f"{name:10s} {seconds[0]:8.2f} {seconds[1]:7.2f} {result.n_steps:5d} "
              f"{shift:14.1e}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("stiff", "whiplash", "fit", "all"), default="all")
    parser.add_argument("--rtol", type=float, default=1e-6)
    arguments = parser.parse_args()
    if arguments.part in ("stiff", "all"):
        stiff_part(arguments.rtol)
    if arguments.part in ("whiplash", "all"):
        whiplash_part()
    if arguments.part in ("fit", "all"):
        fit_part()


if __name__ == "__main__":
    main()
