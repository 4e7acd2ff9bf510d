"""Identification of the head-neck chain's stiffness and damping from the head's trajectory
(issue target: the stiffnesses within 2% at 0.5 mm tracking noise), and the sensitivity of the
peak ligament force to the same parameters.

Synthetic data: the bundled model (`datasets/head_neck.toml`, Table 1 values) in the 8.5 g
pulse, the head's mass centre relative to T1 sampled at `--rate` Hz over `--t-end` s, plus
Gaussian noise of `--noise` m on both coordinates. The script prints
1. Cramer-Rao relative standard errors (%) of every parameter, all six free and subsets, from
   one forward-mode Jacobian through the simulation;
2. fits with the identification engine (`spineid.fit`, Levenberg-Marquardt, forward-mode
   Jacobians through the implicit Kvaerno4 integration) from a start 20-35% off: the three
   stiffnesses with the joint damping, then the identifiable subset;
3. the elasticities of the peak ligament tension (`peak_force_sensitivity`).
Run: python experiments/whiplash_identification.py [--t-end 1.0] [--rate 1000] [--noise 5e-4]

Measured (one run, 2-core CPU, defaults: 0-1 s at 1 kHz, 0.5 mm, seed 0):

    Cramer-Rao relative errors [%]      anterior k  posterior k  ant. c  post. c  joint k  joint c
    all six free                             416        3.28     3.9e4     519     2.48     21.6
    stiffnesses + joint damping              206        2.40       -        -      1.21     0.111
    posterior + joint stiffness and damping   -         2.23       -        -      0.051    0.066

    head track + head angle (0.5 deg)        141        2.25     1.7e4     238     0.829    10.0
    head track + every vertebral angle        88.1        1.70     1.1e4     186     0.52      6.13
    (all six free; the last two rows: what other measurements would add)

    fit of the three stiffnesses + joint damping (60 LM steps, 447 s, not converged: the
    anterior stiffness drifts along a flat valley): anterior -85% (stderr 207%), posterior
    +2.49% (2.39%), joint stiffness +0.45% (1.22%), joint damping +0.03% (0.11%)
    fit of the identifiable three (19 steps, 144 s, converged): posterior +2.13% (stderr
    2.22%), joint stiffness -0.05% (0.05%), joint damping -0.01% (0.07%)
    peak ligament tension over 0-0.4 s 67.1 N; elasticities: posterior stiffness +0.970,
    joint stiffness -0.535, joint damping -0.186, the rest below 0.005 in magnitude

The 2% target for the stiffnesses is met for the joint stiffness k_O, sits at the Cramer-Rao
limit for the posterior ligament (about 2.2-2.4% standard error, so a single fit lands within 2%
only about 60% of the time) and cannot be met for the anterior ligament: with the bundled
geometry it sits about 8 mm in front of each pivot and adds about 2 N m/rad of rotational
stiffness beside the joints' 300 N m/rad, which moves the head by less than the noise (longer
records do not help much: 2 s at 500 Hz gave 159% with the three stiffnesses free), and neither
do richer kinematics: the head's angle, or every vertebra's angle measured to 0.5 degrees
(cineradiography), still leave it at 141% and 88%. The ligament dampings are likewise
invisible. The strongest ligament (posterior T1-C7) is the one
whose stiffness the peak tension follows almost in proportion.
"""

import argparse
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import spineid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--t-end", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--noise", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--angle-noise", type=float, default=0.5,
                        help="noise of measured body angles (deg) for the design comparison")
    arguments = parser.parse_args()
    model_file = spineid.load_model_file(spineid.dataset_path("head_neck.toml"))
    chain, parameters = model_file.model, model_file.parameters
    names = [p.name for p in parameters]
    truth = np.array([float(p.get(chain)) for p in parameters])
    ts = np.linspace(0.0, arguments.t_end, int(round(arguments.t_end * arguments.rate)) + 1)
    print(f"head track 0-{arguments.t_end:g} s at {arguments.rate:g} Hz, noise "
          f"{arguments.noise * 1e3:g} mm ({ts.size} samples x 2 coordinates)")

    angle_noise = np.radians(arguments.angle_noise)
    n_head = 2 * ts.size

    def channels(log_values):
        # The head track (noise units), then every body's absolute angle (C7 ... C1, head)
        # in noise units of a cineradiographic or marker measurement of the vertebrae.
        model = spineid.apply_values(chain, parameters, jnp.exp(log_values))
        solution = spineid.simulate(model, ts, adjoint=diffrax.ForwardMode(), rtol=1e-7,
                                    atol=1e-9, max_steps=100_000)
        head = jax.vmap(model.observe)(solution.q).ravel() / arguments.noise
        return jnp.concatenate([head, solution.q.ravel() / angle_noise])

    clock = time.perf_counter()
    log_truth = jnp.log(jnp.asarray(truth))
    full = np.asarray(jax.jacfwd(channels)(log_truth))
    print(f"sensitivities: {time.perf_counter() - clock:.1f} s (with compilation)")
    sensitivity = full[:n_head]
    angle_rows = full[n_head:].reshape(ts.size, chain.n_dof, len(parameters))

    def cramer_rao(rows, free):
        chosen = rows[:, free]
        return dict(zip(free, np.sqrt(np.diag(np.linalg.inv(chosen.T @ chosen))) * 100))

    def print_row(label, errors):
        print(f"{label:44s} " + " ".join(f"{errors[i]:14.3g}" if i in errors else " " * 14
                                         for i in range(len(parameters))))

    subsets = {"all six": list(range(6)),
               "stiffnesses + joint damping": [0, 1, 4, 5],
               "three stiffnesses": [0, 1, 4],
               "posterior + joint stiffness, joint damping": [1, 4, 5]}
    header = f"{'free set':44s} " + " ".join(f"{n.split('.')[1][:14]:>14s}" for n in names)
    print("\nCramer-Rao relative standard errors [%] from the head track (blank: held fixed)")
    print(header)
    for label, free in subsets.items():
        print_row(label, cramer_rao(sensitivity, free))
    designs = {"head track": sensitivity,
               "head track + head angle": np.concatenate([sensitivity, angle_rows[:, -1]]),
               "head track + every vertebral angle": np.concatenate(
                   [sensitivity, angle_rows.reshape(-1, len(parameters))])}
    print(f"\nWhat other measurements would reveal (angles with "
          f"{arguments.angle_noise:g} deg noise), all six free:")
    print(header)
    for label, rows in designs.items():
        print_row(label, cramer_rao(rows, list(range(6))))

    rng = np.random.default_rng(arguments.seed)
    head = np.asarray(channels(log_truth))[:n_head].reshape(-1, 2) * arguments.noise
    data = head + rng.normal(0.0, arguments.noise, head.shape)
    measurement = spineid.Measurement(ts, data, chain.observable_names)
    noise = {"head_x": arguments.noise, "head_y": arguments.noise}
    factors = np.array([0.75, 1.3, 1.0, 1.0, 0.8, 0.7])  # start: 20-35% off
    for free in (["ligaments.stiffness", "joints.stiffness", "joints.damping"],
                 ["ligaments.posterior_stiffness", "joints.stiffness", "joints.damping"]):
        chosen = [p for p in parameters if p.group in free or p.name in free]
        start = spineid.apply_values(chain, chosen, jnp.asarray(
            [truth[names.index(p.name)] * factors[names.index(p.name)] for p in chosen]))
        problem = spineid.FitProblem(model_file, measurement, free=free, noise=noise,
                                     models=[start], simulation_rtol=1e-7,
                                     simulation_atol=1e-9)
        result = spineid.fit(problem, spineid.LevenbergMarquardt(rtol=1e-6, atol=1e-6,
                                                                 max_steps=60))
        print(f"\nfit --free {' --free '.join(free)}: {result.message}, {result.n_steps} "
              f"steps, {result.seconds:.0f} s")
        for name, value, stderr in zip(result.names, result.values, result.stderr):
            true_value = truth[names.index(name)]
            print(f"  {name:32s} {value:11.4g} +- {stderr:9.3g}  truth {true_value:g}  error "
                  f"{(value / true_value - 1) * 100:+7.2f} %  stderr "
                  f"{stderr / true_value * 100:7.2f} %")

    clock = time.perf_counter()
    force, elasticity = spineid.peak_force_sensitivity(chain, parameters, t_end=0.4)
    print(f"\npeak ligament tension over 0-0.4 s: {force:.1f} N; elasticities "
          f"({time.perf_counter() - clock:.0f} s):")
    for name, value in zip(names, elasticity):
        print(f"  {name:32s} {value:+.3f}")


if __name__ == "__main__":
    main()
