"""Experiment design and posteriors (issue 27) on the seed problems, with the targets measured.

1. The 4-axial-spring pair (datasets/axial_4_springs.toml, optical-tracking noise): which of
   the single-component load cases (Fx, Fy, Mz at 2, 5, 12 and 30 Hz, 0.5 s each) best
   separate the four springs, the D-optimal pair against the bundled protocol (all three
   components together); the design validated by simulating it and fitting 50 noisy draws
   (target: realised standard errors within 20% of the predicted).
2. A 6-parameter bushing (datasets/spatial_pair.toml, its diagonal stiffness free): the
   D-optimal 3 of 12 load cases (each component at two frequencies), the time of a warm
   design (target: under 30 s).
3. NUTS on the 4-axial-spring problem: effective draws per parameter and the time (target:
   >= 400 effective draws for every parameter in under 2 minutes on a 2-core CPU), the
   posterior against the Cramer-Rao interval.
4. All 21 entries of a full 6x6 bushing stiffness (Christophy et al. 2013's lumbar K_F^E,
   eq 24, as the nominal matrix of the spatial pair): the fewest of 12 single-component load
   cases that identify every entry, by D-optimal designs of 1, 2, 3 ... experiments.

    python experiments/design_and_posterior.py [--repetitions 50] [--draws 650]
"""

import argparse
import copy
import time

import numpy as np

import spineid


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


def validate(found, repetitions, seed=0):
    problem = found.problem()
    sigma = np.array([problem.noise[c] for c in problem.channels])
    rng = np.random.default_rng(seed)
    estimates = []
    for _ in range(repetitions):
        noisy = [spineid.Measurement(m.ts, m.values + rng.normal(size=m.values.shape) * sigma,
                                     m.channels) for m in problem.measurements]
        fitted = spineid.fit(spineid.FitProblem(problem.model_file, noisy, problem.names,
                                                problem.noise, models=problem.models),
                             spineid.LevenbergMarquardt())
        estimates.append(fitted.values)
    return np.std(estimates, axis=0, ddof=1)


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


def bushing():
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
    print()


def full_stiffness():
    print("4. The 21 entries of a full 6x6 bushing stiffness: the fewest load cases")
    model_file = spineid.load_model_file(spineid.dataset_path("spatial_pair.toml"))
    document = copy.deepcopy(model_file.document)
    document["bushings"][0]["stiffness"] = np.asarray(spineid.K_F_E).tolist()
    path_free = [f"bushings[0].stiffness[{i}][{j}]" for i in range(6) for j in range(i, 6)]
    noise = {c: (1e-5 if c in ("x", "y", "z") else float(np.radians(0.01)))
             for c in model_file.model.observable_names}
    amplitudes = {"Fx": 20.0, "Fy": 40.0, "Fz": 20.0, "Mx": 0.5, "My": 0.5, "Mz": 0.5}
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
    for budget in range(1, 7):
        start = time.perf_counter()
        found = spineid.design(candidates, path_free, noise, budget=budget)
        count = int(np.sum(found.identifiable))
        relative = found.stderr / reference
        worst = int(np.nanargmax(relative))
        print(f"   {budget} load case(s) {', '.join(found.chosen)}: {count} of 21 entries "
              f"identifiable; within 10% of sqrt(K_ii K_jj): {int(np.sum(relative < 0.1))}; "
              f"worst {found.names[worst]} {relative[worst]:.2g} "
              f"({time.perf_counter() - start:.1f} s)")
        if np.all(relative < 0.1):
            break
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
    sampled = spineid.posterior(problem, samples=draws, start=fitted.values)
    seconds = time.perf_counter() - start
    print(f"   {draws} draws in {seconds:.1f} s (first call, compiling included); effective "
          f"draws {', '.join(f'{e:.0f}' for e in sampled.effective_samples)} (target: >= 400 "
          "each in under 120 s)")
    print("   posterior sd / Cramer-Rao: "
          + ", ".join(f"{r:.2f}" for r in sampled.sd / fitted.stderr))
    print("   " + sampled.summary().replace("\n", "\n   "))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--draws", type=int, default=650)
    arguments = parser.parse_args()
    axial_springs(arguments.repetitions)
    bushing()
    nuts(arguments.draws)
    full_stiffness()


if __name__ == "__main__":
    main()
