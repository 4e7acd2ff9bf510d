"""Which diffrax solver and tolerances should spineid use by default? Measured, not guessed.

For the bundled 16-spring pair (0.5 s, 501 samples) each candidate integrator is run at a range
of tolerances; the error is the largest deviation from a tight-tolerance Dopri8 reference,
relative to the range of each pose channel, and the time is the best of several warm runs.
Prints one row per (solver, rtol) and, for each accuracy level, the fastest solver reaching it.

Run: python experiments/solver_choice.py
"""


import diffrax
import jax.numpy as jnp
import numpy as np

import spineid
from timing import best_time


def main():
    model = spineid.load_model(spineid.dataset_path("liu_16_springs.toml"))
    ts = jnp.linspace(0.0, 0.5, 501)
    reference = spineid.simulate(
        model, ts, solver=diffrax.Dopri8(), rtol=1e-13, atol=1e-15, max_steps=10**6
    )
    scale = np.ptp(np.asarray(reference.q), axis=0)
    candidates = {
        "Tsit5 (explicit 5)": diffrax.Tsit5(),
        "Dopri5 (explicit 5)": diffrax.Dopri5(),
        "Dopri8 (explicit 8)": diffrax.Dopri8(),
        "Kvaerno5 (implicit 5)": diffrax.Kvaerno5(),
        "Kvaerno3 (implicit 3)": diffrax.Kvaerno3(),
    }
    rows = []
    print(f"{'solver':24s} {'rtol':>8s} {'steps':>7s} {'rel. error':>11s} {'warm ms':>9s}")
    for name, solver in candidates.items():
        for rtol in (1e-4, 1e-6, 1e-8, 1e-10, 1e-12):
            def run():
                return spineid.simulate(
                    model, ts, solver=solver, rtol=rtol, atol=rtol * 1e-2, max_steps=10**6
                ).q.block_until_ready()

            run()
            seconds = best_time(run, repeats=5)
            solution = spineid.simulate(
                model, ts, solver=solver, rtol=rtol, atol=rtol * 1e-2, max_steps=10**6
            )
            error = float(np.max(np.abs(np.asarray(solution.q - reference.q)) / scale))
            rows.append((name, rtol, int(solution.n_steps), error, seconds))
            print(f"{name:24s} {rtol:8.0e} {int(solution.n_steps):7d} {error:11.2e} "
                  f"{seconds * 1e3:9.2f}")
    print("\nfastest solver reaching each accuracy (relative error):")
    for target in (1e-4, 1e-6, 1e-8, 1e-9, 1e-10):
        reaching = [row for row in rows if row[3] <= target]
        if reaching:
            best = min(reaching, key=lambda row: row[4])
            print(f"  <= {target:.0e}: {best[0]} at rtol={best[1]:.0e} "
                  f"({best[4] * 1e3:.2f} ms, error {best[3]:.1e})")
        else:
            print(f"  <= {target:.0e}: none")


if __name__ == "__main__":
    main()
