"""Experiment design and posteriors (issue 27) on the seed problems, with the targets measured.

1. The 4-axial-spring pair (datasets/axial_4_springs.toml, optical-tracking noise): which of
   the single-component load cases (Fx, Fy, Mz at 2, 5, 12 and 30 Hz, 0.5 s each) best
   separate the four springs, the D-optimal pair against the bundled protocol (all three
   components together); the design validated by simulating it and fitting 50 noisy draws
   (target: realised standard errors within 20% of the predicted).
2. A 6-parameter bushing (datasets/spatial_pair.toml, its diagonal stiffness free): the
   D-optimal 3 of 12 load cases (each component at two frequencies), the time of a warm
   design (target: under 30 s), and the design validated by fitting 50 noisy draws of it
   (`--repetitions`).
3. NUTS on the 4-axial-spring problem: effective draws per parameter and the time (target:
   >= 400 effective draws for every parameter in under 2 minutes on a 2-core CPU), the
   posterior against the Cramer-Rao interval.
4. All 21 entries of a full 6x6 bushing stiffness (Christophy et al. 2013's lumbar K_F^E,
   eq 24, as the nominal matrix of the spatial pair): the fewest of 12 single-component load
   cases that identify every entry, by D-optimal designs of 1, 2, 3 ... experiments, every
   case within the joint's safe range (3 mm, 3 degrees); the design's linearity checked
   (`Design.check_linearity`) and the design validated by fitting noisy simulations of it
   (`--repetitions-21`, all 21 free; `--cases-21` for more load cases than the fewest,
   `--amplitude-21` for larger loads).
5. The anterior cervical ligament of the head-neck chain (datasets/head_neck.toml): the best
   1 and 3 of 18 base pulses (rear and frontal; 4, 8.5, 15 g; 60, 105, 150 ms) for its
   Cramer-Rao error from the head's track, and what added measurements would give (the head's
   angle, every body's angle, the ligament's tension at one level).
6. Correlated errors (issue 50), on the 4-axial-spring pair with every channel's errors an
   AR(1) of coefficient 0.8: the design's predicted errors (`design(..., correlation=...)`)
   against the realised spread of `--repetitions` validation fits made as a lab would (noise
   estimated, noise model auto), and against what the white design predicts; then
   `--posterior-repetitions` data sets of such errors, each fitted and sampled
   (`posterior(problem, fit=...)`): the posterior sd over the fit's standard errors, and the
   coverage of the truth by the 95% credible intervals.

    python experiments/design_and_posterior.py [--repetitions 50] [--draws 650]
        [--repetitions-21 20] [--cases-21 N] [--amplitude-21 1] [--head-neck-rate 500]
        [--repetitions-head-neck N] [--head-neck-rtol 1e-5] [--head-neck-pulses P1,P2,P3]
        [--posterior-repetitions 20] [--sections 123456]
        [--executor local|dask] [--threads 1] [--workers 2]
        [--scheduler ADDRESS] [--batch-out DIR]

The validations' noisy fits are Monte-Carlo batches (`spineid.fit_batch`): `--threads N` runs
N at once in this process, `--executor dask` runs them on a LocalCluster of `--workers`
processes, or on the cluster at `--scheduler`. With `--batch-out DIR` each validation streams
its finished fits to a folder of DIR and continues from it when run again (the same noise
draws: an interrupted validation of hours resumes where it stopped).
"""

import argparse
import copy
import pathlib
import time

import jax
import numpy as np

import spineid
from spineid.identify._common._noise_model import stationary_errors


def candidates_of(path, components, frequencies, amplitudes, times):
    model_file = spineid.load_model_file(spineid.dataset_path(path))
    out = []
    for component in components:
        for frequency in frequencies:
            document = copy.deepcopy(model_file.document)
            document["loads"] = [{"component": component, "amplitude": amplitudes[component],
                                  "frequency": frequency}]
            out.append(spineid.Candidate(f"{component}@{frequency:g}Hz",
                                         spineid.ModelFile.from_document(document), times))
    return out


# Where the Monte-Carlo fits of the validations run (`--executor`, `--threads`, `--workers`),
# and the folder they stream to (`--batch-out`).
EXECUTOR = spineid.Local()
BATCH_OUT = None


def validate(found, repetitions, seed=0, label=None, **simulation):
    """The spread of the estimates over `repetitions` fits of noisy simulations of the design
    (`spineid.validate_design`, a batch on `EXECUTOR`; failed fits are left out and counted);
    `simulation`: the fits' `simulation_*` options (`Design.problem`); with `BATCH_OUT`, the
    fits stream to its folder `label` and a later run resumes them."""
    out = None if BATCH_OUT is None or label is None else BATCH_OUT / label
    resume = out is not None and out.is_dir() and any(out.iterdir())
    checked = spineid.validate_design(found, repetitions, seed=seed, executor=EXECUTOR,
                                      out=out, resume=resume, progress=out is not None,
                                      **simulation)
    if checked.errors:
        print(f"   {len(checked.errors)} of {repetitions} fits failed and are left out: "
              + checked.fits.summary().replace("\n", "\n   "))
    return checked.realised


def axial_springs(repetitions):
    print("1. Four axial springs: which load cases separate them")
    noise = {"x": 5e-6, "y": 5e-6, "theta": float(np.radians(0.01))}
    times = np.linspace(0.0, 0.5, 251)
    amplitudes = {"Fx": 6.0, "Fy": 4.0, "Mz": 0.08}
    candidates = candidates_of("axial_4_springs.toml", list(amplitudes), (2.0, 5.0, 12.0, 30.0),
                               amplitudes, times)
    bundled = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    candidates.append(spineid.Candidate("bundled", bundled, times))
    start = time.perf_counter()
    found = spineid.design(candidates, ["stiffness"], noise, budget=2, baseline=["bundled"])
    print(f"   first design {time.perf_counter() - start:.1f} s (compiling)")
    print("   " + found.summary().replace("\n", "\n   "))
    start = time.perf_counter()
    realised = validate(found, repetitions)
    print(f"   {repetitions} noisy fits of the design ({time.perf_counter() - start:.1f} s): "
          "realised / predicted standard error "
          + ", ".join(f"{r:.2f}" for r in realised / found.stderr))
    print()


def bushing(repetitions):
    print("2. A 6-parameter bushing: 3 of 12 load cases")
    model_file = spineid.load_model_file(spineid.dataset_path("spatial_pair.toml"))
    noise = {c: (1e-5 if c in ("x", "y", "z") else float(np.radians(0.01)))
             for c in model_file.model.observable_names}
    amplitudes = {"Fx": 20.0, "Fy": 40.0, "Fz": 20.0, "Mx": 0.5, "My": 0.5, "Mz": 0.5}
    times = np.linspace(0.0, 0.2, 101)
    candidates = candidates_of("spatial_pair.toml", list(amplitudes), (5.0, 20.0), amplitudes,
                               times)
    times_taken = []
    for _ in range(2):
        start = time.perf_counter()
        found = spineid.design(candidates, ["bushing.stiffness"], noise, budget=3,
                               limits={"force": 50.0, "moment": 1.0})
        times_taken.append(time.perf_counter() - start)
    print(f"   design: first {times_taken[0]:.1f} s, warm {times_taken[1]:.1f} s (target: under "
          "30 s warm)")
    print("   " + found.summary().replace("\n", "\n   "))
    start = time.perf_counter()
    realised = validate(found, repetitions, label="bushing")
    print(f"   {repetitions} noisy fits of the design ({time.perf_counter() - start:.1f} s): "
          "realised / predicted standard error "
          + ", ".join(f"{r:.2f}" for r in realised / found.stderr))
    print()


# The joint's safe range in section 4 (`design(limits={"motion": ...})`): 3 mm and 3 degrees.
SAFE_RANGE_21 = {"x": 3e-3, "y": 3e-3, "z": 3e-3, "a1": np.radians(3.0), "a2": np.radians(3.0),
                 "a3": np.radians(3.0)}


def full_stiffness(repetitions, least_cases=1, scale=1.0):
    print("4. The 21 entries of a full 6x6 bushing stiffness: the fewest load cases"
          + (f" (loads x{scale:g}, within 3 mm and 3 degrees)" if scale != 1.0 else ""))
    model_file = spineid.load_model_file(spineid.dataset_path("spatial_pair.toml"))
    document = copy.deepcopy(model_file.document)
    document["bushings"][0]["stiffness"] = np.asarray(spineid.K_F_E).tolist()
    path_free = [f"bushings[0].stiffness[{i}][{j}]" for i in range(6) for j in range(i, 6)]
    noise = {c: (1e-5 if c in ("x", "y", "z") else float(np.radians(0.01)))
             for c in model_file.model.observable_names}
    amplitudes = {"Fx": 20.0, "Fy": 40.0, "Fz": 20.0, "Mx": 0.5, "My": 0.5, "Mz": 0.5}
    amplitudes = {c: a * scale for c, a in amplitudes.items()}
    times = np.linspace(0.0, 0.2, 101)
    candidates = []
    for component, amplitude in amplitudes.items():
        for frequency in (5.0, 20.0):
            changed = copy.deepcopy(document)
            changed["loads"] = [{"component": component, "amplitude": amplitude,
                                 "frequency": frequency}]
            candidates.append(spineid.Candidate(f"{component}@{frequency:g}Hz",
                                                spineid.ModelFile.from_document(changed),
                                                times))
    # Each entry's standard error against sqrt(K_ii K_jj), the size a coupling could have.
    diagonal = np.abs(np.diag(np.asarray(spineid.K_F_E)))
    reference = np.array([np.sqrt(diagonal[i] * diagonal[j]) for i in range(6)
                          for j in range(i, 6)])
    for budget in range(least_cases, 7):
        start = time.perf_counter()
        found = spineid.design(candidates, path_free, noise, budget=budget,
                               limits={"motion": SAFE_RANGE_21})
        count = int(np.sum(found.identifiable))
        relative = found.stderr / reference
        worst = int(np.nanargmax(relative))
        print(f"   {budget} load case(s) {', '.join(found.chosen)}: {count} of 21 entries "
              f"identifiable; within 10% of sqrt(K_ii K_jj): {int(np.sum(relative < 0.1))}; "
              f"worst {found.names[worst]} {relative[worst]:.2g} "
              f"({time.perf_counter() - start:.1f} s)")
        if np.all(relative < 0.1):
            break
    # Whether the prediction's linearisation holds over the estimates' own spread.
    check = found.check_linearity()
    print("   " + check.summary().replace("\n", "\n   "))
    # The design validated: noisy simulations of the chosen load cases, each fitted (all 21
    # entries free, from the nominal matrix), the spread of the estimates against the
    # predicted standard errors.
    start = time.perf_counter()
    realised = validate(found, repetitions)
    ratio = realised / found.stderr
    print(f"   validated by {repetitions} noisy fits of the {len(found.chosen)} load cases "
          f"({time.perf_counter() - start:.0f} s): realised / predicted standard error per "
          f"entry: median {np.median(ratio):.2f}, range {ratio.min():.2f}-{ratio.max():.2f} "
          f"(a spread of {repetitions} draws is itself uncertain by about "
          f"{1 / np.sqrt(2 * (repetitions - 1)):.0%})")
    outside = [i for i in np.argsort(-np.abs(np.log(ratio)))
               if abs(ratio[i] - 1) > 2 / np.sqrt(2 * (repetitions - 1))]
    for i in outside:
        print(f"   beyond two of those spreads: {found.names[i]} {ratio[i]:.2f}")
    # Each entry's realised / predicted error beside what the linearity check said of it (the
    # direction farthest from 1 on both sides together, and between the sides).
    both, one = check.farthest(check.both_ways()), check.farthest(check.one_way())
    print(f"   {'entry':30s} {'realised/predicted':>18s} {'both ways':>10s} {'one way':>8s}")
    for j, name in enumerate(found.names):
        print(f"   {name:30s} {ratio[j]:18.2f} {both[j]:10.2f} {one[j]:8.2f}")
    print()


def nuts(draws):
    print("3. NUTS on the four axial springs")
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    noise = {"x": 5e-6, "y": 5e-6, "theta": float(np.radians(0.01))}
    times = np.linspace(0.0, 0.5, 501)
    truth = spineid.simulate(model_file.model, times)
    import jax
    clean = np.asarray(jax.vmap(model_file.model.observe)(truth.q))
    sigma = np.array([noise[c] for c in model_file.model.observable_names])
    data = clean + np.random.default_rng(4).normal(size=clean.shape) * sigma
    problem = spineid.FitProblem(model_file, spineid.Measurement(times, data,
                                                                 ("x", "y", "theta")),
                                 ["stiffness"], noise)
    fitted = spineid.fit(problem, spineid.LevenbergMarquardt())
    start = time.perf_counter()
    # `draws` in all, over 4 chains (one after another, the default).
    sampled = spineid.posterior(problem, samples=max(10, draws // 4), chains=4,
                                start=fitted.values)
    seconds = time.perf_counter() - start
    print(f"   {len(sampled.draws)} draws (4 chains) in {seconds:.1f} s (first call, compiling "
          f"included); bulk effective draws "
          f"{', '.join(f'{e:.0f}' for e in sampled.effective_samples)}, tail "
          f"{', '.join(f'{e:.0f}' for e in sampled.ess_tail)}, R-hat "
          f"{', '.join(f'{r:.3f}' for r in sampled.r_hat)} (target: >= 400 each in under "
          "120 s)")
    print("   posterior sd / Cramer-Rao: "
          + ", ".join(f"{r:.2f}" for r in sampled.sd / fitted.stderr))
    print("   " + sampled.summary().replace("\n", "\n   "))
    print()


HEAD_NECK_FREE = ["ligaments.stiffness", "joints.stiffness", "joints.damping"]
ANTERIOR = "ligaments.anterior_stiffness"


def head_neck(rate, repetitions=0, rtol=None, pulses=None):
    """The anterior cervical ligament of the head-neck chain: the pulses that would identify it
    from the head's track, and the measurements that would; with `repetitions`, the best three
    pulses' design checked for linearity and validated by that many noisy fits (at the ODE
    tolerance `rtol`, `atol` a hundredth of it; default the fit's own); `pulses` (candidate
    names): those instead of searching the best three (the search takes about 20 minutes)."""
    import diffrax
    import jax
    import jax.numpy as jnp

    print("5. head-neck chain: the anterior ligament's stiffness (one value for every level), "
          f"free with the posterior's and the joints' stiffness and damping; head track 0-1 s "
          f"at {rate:g} Hz, 0.5 mm noise")
    model_file = spineid.load_model_file(spineid.dataset_path("head_neck.toml"))
    times = np.linspace(0.0, 1.0, int(round(rate)) + 1)
    noise = {"head_x": 5e-4, "head_y": 5e-4}
    candidates = []
    for direction, side in (((1.0, 0.0), "rear"), ((-1.0, 0.0), "frontal")):
        for g in (4.0, 8.5, 15.0):
            for t_end in (0.06, 0.105, 0.15):
                document = copy.deepcopy(model_file.document)
                document["pulse"] = {"peak": g * 9.80665, "t_peak": t_end / 2,
                                     "t_end": t_end, "direction": list(direction)}
                candidates.append(spineid.Candidate(
                    f"{side} {g:g} g {t_end * 1e3:.0f} ms",
                    spineid.ModelFile.from_document(document, folder=model_file.folder), times))
    clock = time.perf_counter()
    if pulses:
        unknown = [p for p in pulses if p not in [c.name for c in candidates]]
        if unknown:
            raise SystemExit(f"--head-neck-pulses: unknown {unknown}; the candidates are "
                             + ", ".join(c.name for c in candidates))
        candidates = [c for c in candidates if c.name in pulses or c.name == "rear 8.5 g 105 ms"]
    for budget in ((len(pulses),) if pulses else (1, 3)):
        found = spineid.design(candidates, HEAD_NECK_FREE, noise, criterion=[ANTERIOR],
                               budget=budget, baseline=["rear 8.5 g 105 ms"])
        j = found.names.index(ANTERIOR)
        print(f"   best {budget} of {len(candidates)} pulses (rear and frontal; 4, 8.5, 15 g; "
              f"60, 105, 150 ms): {', '.join(found.chosen)}: anterior stiffness "
              f"{found.relative_stderr()[j]:.0%} (the seed's pulse alone "
              f"{found.baseline_stderr[j] / found.values[j]:.0%})")
    print(f"   ({time.perf_counter() - clock:.0f} s)")
    if repetitions:
        clock = time.perf_counter()
        check = found.check_linearity()
        print("   linearity of the best three (" + f"{time.perf_counter() - clock:.0f} s): "
              + check.summary().replace("\n", "\n   "))
        clock = time.perf_counter()
        simulation = {} if rtol is None else {"simulation_rtol": rtol,
                                               "simulation_atol": rtol * 1e-2}
        realised = validate(found, repetitions, label="head-neck", **simulation)
        print(f"   {repetitions} noisy fits of the best three ({time.perf_counter() - clock:.0f} "
              f"s{'' if rtol is None else f', rtol {rtol:g}'}): realised / predicted standard "
              "error "
              + ", ".join(f"{name} {r:.2f}" for name, r in zip(found.names,
                                                               realised / found.stderr)))
    # What added measurements would do, at the seed's pulse: the sensitivities of the head
    # track and of other channels, by forward mode through the simulation, each channel in
    # units of its noise.
    chain = model_file.model
    problem = spineid.FitProblem(model_file, spineid.Measurement(
        times, np.zeros((times.size, 2)), chain.observable_names), HEAD_NECK_FREE, noise)
    parameters, values = problem.parameters, problem.start
    angle_noise, force_noise = np.radians(0.5), 1.0

    def channels(log_values):
        model = spineid.apply_values(chain, parameters, jnp.exp(log_values))
        solution = spineid.simulate(model, times, adjoint=diffrax.ForwardMode(), rtol=1e-7,
                                    atol=1e-9, max_steps=100_000)
        head = jax.vmap(model.observe)(solution.q) / 5e-4
        forces = jax.vmap(model.ligament_forces)(jnp.asarray(times), solution.q, solution.qdot)
        return head, solution.q / angle_noise, forces[:, 0] / force_noise

    head, angles, anterior = (np.asarray(a) for a in jax.jacfwd(channels)(
        jnp.log(jnp.asarray(values))))
    head = head.reshape(-1, len(values))  # (k 2, p); angles and anterior (k, n, p)
    levels = anterior.shape[1]
    j = problem.names.index(ANTERIOR)

    def error(*blocks):
        rows = np.concatenate(blocks)
        return np.sqrt(np.linalg.inv(rows.T @ rows)[j, j])

    print("   added to the head track at the seed's pulse (Cramer-Rao error of the anterior "
          "stiffness):")
    print(f"     head track alone                                        {error(head):8.1%}")
    print(f"     + the head's angle (0.5 deg)                            "
          f"{error(head, angles[:, -1]):8.1%}")
    print(f"     + every body's angle (0.5 deg, cineradiography)         "
          f"{error(head, angles.reshape(-1, len(values))):8.1%}")
    for level in (0, levels // 2, levels - 1):
        print(f"     + the anterior ligament's tension below body {level} (1 N)      "
              f"{error(head, anterior[:, level]):8.1%}")
    print()


def correlated(repetitions, posterior_repetitions):
    print("6. Correlated errors: AR(1), phi 0.8, in every channel")
    noise = {"x": 5e-6, "y": 5e-6, "theta": float(np.radians(0.01))}
    correlation = {c: [0.8] for c in noise}
    times = np.linspace(0.0, 0.5, 251)
    amplitudes = {"Fx": 6.0, "Fy": 4.0, "Mz": 0.08}
    candidates = candidates_of("axial_4_springs.toml", list(amplitudes), (2.0, 5.0, 12.0, 30.0),
                               amplitudes, times)
    found = spineid.design(candidates, ["stiffness"], noise, budget=2, correlation=correlation)
    white = spineid.design(candidates, ["stiffness"], noise, budget=2, baseline=found.chosen)
    print("   " + found.summary().replace("\n", "\n   "))
    start = time.perf_counter()
    realised = validate(found, repetitions, seed=6)
    print(f"   {repetitions} fits of AR(1) simulations, noise estimated, model auto "
          f"({time.perf_counter() - start:.1f} s): realised / predicted standard error "
          + ", ".join(f"{r:.2f}" for r in realised / found.stderr)
          + " (the white design's prediction: "
          + ", ".join(f"{r:.2f}" for r in realised / white.baseline_stderr) + " for the same "
          f"experiments; chosen {', '.join(white.chosen)} under white errors, "
          f"{', '.join(found.chosen)} under AR)")
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    truth_values = None
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, times).q))
    rng = np.random.default_rng(8)
    ratios, covered, seconds = [], [], []
    for r in range(posterior_repetitions):
        errors = np.stack([stationary_errors([0.8], noise[c], len(times), rng)
                           for c in ("x", "y", "theta")], axis=1)
        problem = spineid.FitProblem(model_file, spineid.Measurement(
            times, clean + errors, ("x", "y", "theta")), ["stiffness"])
        truth_values = problem.start if truth_values is None else truth_values
        fitted = spineid.fit(problem, spineid.LevenbergMarquardt())
        start = time.perf_counter()
        sampled = spineid.posterior(problem, fit=fitted, samples=100, warmup=150, seed=r)
        seconds.append(time.perf_counter() - start)
        ratios.append(sampled.sd / fitted.stderr)
        interval = sampled.interval()
        covered.append((interval[:, 0] <= truth_values) & (truth_values <= interval[:, 1]))
    if posterior_repetitions:
        covered = np.array(covered)
        print(f"   {posterior_repetitions} posteriors of AR(1) data (4 chains of 100 draws, "
              f"{np.median(seconds):.1f} s median, the first {seconds[0]:.1f} s): posterior sd"
              " / the fit's standard error, median "
              + ", ".join(f"{m:.2f}" for m in np.median(ratios, axis=0))
              + f"; 95% intervals cover the truth in {covered.mean():.0%} of "
              f"{covered.size} ({', '.join(f'{c:.0%}' for c in covered.mean(axis=0))} per "
              "spring)")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--draws", type=int, default=650)
    parser.add_argument("--repetitions-21", type=int, default=20,
                        help="noisy fits validating the 21-entry design of section 4")
    parser.add_argument("--cases-21", type=int, default=1,
                        help="section 4: design at least this many load cases (default: "
                             "the fewest that determine every entry within 10%%)")
    parser.add_argument("--amplitude-21", type=float, default=1.0,
                        help="section 4: every load case's amplitude times this")
    parser.add_argument("--head-neck-rate", type=float, default=500.0,
                        help="sampling of the head track in section 5 (Hz)")
    parser.add_argument("--repetitions-head-neck", type=int, default=0,
                        help="section 5: noisy fits validating the best three pulses (minutes "
                             "each; default none)")
    parser.add_argument("--head-neck-rtol", type=float, default=None,
                        help="section 5: the validation fits' ODE tolerance (default the "
                             "fit's, 1e-8; measured, 1e-5 at least twice as fast, its "
                             "estimates within 0.01 standard errors of 1e-6's)")
    parser.add_argument("--head-neck-pulses", default=None,
                        help="section 5: these pulses (comma-separated names, e.g. 'frontal "
                             "15 g 150 ms,rear 15 g 60 ms,rear 15 g 150 ms', the best three "
                             "found) instead of the search")
    parser.add_argument("--posterior-repetitions", type=int, default=20)
    parser.add_argument("--sections", default="123456")
    parser.add_argument("--executor", choices=("local", "dask"), default="local",
                        help="where the validations' noisy fits run")
    parser.add_argument("--threads", type=int, default=1,
                        help="with --executor local: fits at once in this process")
    parser.add_argument("--batch-out", default=None,
                        help="stream each validation's fits to a folder of this one, and "
                             "resume from it")
    parser.add_argument("--workers", type=int, default=2,
                        help="with --executor dask: local worker processes")
    parser.add_argument("--scheduler", default=None,
                        help="with --executor dask: a running scheduler's address")
    arguments = parser.parse_args()
    global EXECUTOR, BATCH_OUT
    if arguments.executor == "dask":
        EXECUTOR = spineid.Dask(scheduler=arguments.scheduler, workers=arguments.workers)
    elif arguments.threads > 1:
        EXECUTOR = spineid.Local(threads=arguments.threads)
    if arguments.batch_out is not None:
        BATCH_OUT = pathlib.Path(arguments.batch_out)
    if "1" in arguments.sections:
        axial_springs(arguments.repetitions)
    if "2" in arguments.sections:
        bushing(arguments.repetitions)
    if "3" in arguments.sections:
        nuts(arguments.draws)
    if "4" in arguments.sections:
        full_stiffness(arguments.repetitions_21, arguments.cases_21, arguments.amplitude_21)
    if "5" in arguments.sections:
        head_neck(arguments.head_neck_rate, arguments.repetitions_head_neck,
                  arguments.head_neck_rtol, arguments.head_neck_pulses
                  and [p.strip() for p in arguments.head_neck_pulses.split(",")])
    if "6" in arguments.sections:
        correlated(arguments.repetitions, arguments.posterior_repetitions)


if __name__ == "__main__":
    main()
