"""Several chains of a posterior and their diagnostics (`spineid.posterior(..., chains=4)`).

Oracles: ArviZ's rank-normalised split R-hat and bulk and tail effective sample sizes on the
same draws (`arviz.rhat`, `arviz.ess`: an independent implementation of Vehtari et al. 2021);
independent draws, whose effective size is their number; a conjugate linear-Gaussian problem
whose posterior is known in closed form (a mass on a spring pushed by a constant force of
unknown size: its displacement `x(t) = F (1 - cos(omega t)) / k` is linear in `F`, so with a
normal prior on `F` the posterior is the normal of the two precisions added).
"""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import spineid
from spineid.identify._design._diagnostics import ess_bulk, ess_tail, r_hat
from spineid.identify._design._posterior import R_HAT

pytestmark = pytest.mark.xdist_group("posterior")

arviz = pytest.importorskip("arviz")


def _ar_chains(chains: int, draws: int, phi: float, seed: int, shift: float = 0.0):
    # Autocorrelated, heavy-tailed chains (Student t innovations), chain k moved by k * shift.
    rng = np.random.default_rng(seed)
    x = np.zeros((chains, draws))
    innovations = rng.standard_t(3, size=(chains, draws))
    for i in range(1, draws):
        x[:, i] = phi * x[:, i - 1] + innovations[:, i]
    return x + shift * np.arange(chains)[:, None]


@pytest.mark.parametrize("chains, draws, phi, shift", [
    (4, 200, 0.8, 0.0), (4, 201, 0.5, 0.0), (2, 57, 0.9, 0.0), (3, 33, 0.3, 0.0),
    (4, 1000, 0.95, 0.0), (4, 300, 0.6, 1.5), (1, 120, 0.2, 0.0)])
def test_the_diagnostics_are_arvizs_on_the_same_draws(chains, draws, phi, shift):
    x = _ar_chains(chains, draws, phi, seed=chains * draws, shift=shift)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (ArviZ warns about one chain)
        theirs = arviz.rhat(x, method="rank"), arviz.ess(x, method="bulk"), \
            arviz.ess(x, method="tail")
    if chains > 1:
        assert r_hat(x) == pytest.approx(float(theirs[0]), rel=1e-12)
    assert ess_bulk(x) == pytest.approx(float(theirs[1]), rel=1e-12)
    assert ess_tail(x) == pytest.approx(float(theirs[2]), rel=1e-12)


def test_independent_draws_are_as_many_effective_draws_and_shifted_chains_are_caught():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 2000))
    assert ess_bulk(x) == pytest.approx(8000, rel=0.1)
    assert ess_tail(x) == pytest.approx(8000, rel=0.15)
    assert abs(r_hat(x) - 1) < 0.005
    x[3] += 0.5  # one chain half a standard deviation elsewhere: past the warning line
    assert r_hat(x) > R_HAT
    # A chain that drifts: its two halves disagree, R-hat sees it in one chain alone.
    drift = rng.normal(size=(1, 2000)) + np.linspace(0, 3, 2000)
    assert r_hat(drift) > 1.1


class PushedMass(spineid.AbstractLagrangianSystem):
    """A mass on a spring (kg, N/m) at rest, pushed by a constant force (N) from t = 0."""

    mass: Float[Array, ""]
    stiffness: Float[Array, ""]
    force: Float[Array, ""]

    def kinetic_energy(self, t, q, qdot):
        return 0.5 * self.mass * qdot[0] ** 2

    def potential_energy(self, t, q):
        return 0.5 * self.stiffness * q[0] ** 2

    def dissipation_function(self, t, q, qdot):
        return jnp.zeros(())

    def generalized_forces(self, t, q, qdot):
        return jnp.atleast_1d(self.force)

    def initial_state(self):
        return jnp.zeros(1), jnp.zeros(1)

    @property
    def observable_names(self):
        return ("x",)

    def parameter_fields(self):
        return (spineid.ParameterField("force", "force", "N", lower=-np.inf),)


TS = np.linspace(0.0, 2.0, 201)
SIGMA, TRUE_FORCE, PRIOR = 1e-3, 3.0, (2.98, 0.008)  # m, N, N


@pytest.fixture(scope="module")
def conjugate():
    mass, stiffness = 1.0, 100.0
    shape = (1.0 - np.cos(np.sqrt(stiffness / mass) * TS)) / stiffness  # x per newton
    data = TRUE_FORCE * shape + np.random.default_rng(11).normal(size=TS.size) * SIGMA
    model = PushedMass(mass=jnp.asarray(mass), stiffness=jnp.asarray(stiffness),
                       force=jnp.asarray(2.9))
    problem = spineid.FitProblem(model, spineid.Measurement(TS, data[:, None], ("x",)),
                                 ["force"], {"x": SIGMA})
    # The exact posterior: precisions add, means weighted by them.
    precision = shape @ shape / SIGMA**2 + 1.0 / PRIOR[1] ** 2
    mean = (shape @ data / SIGMA**2 + PRIOR[0] / PRIOR[1] ** 2) / precision
    return problem, mean, 1.0 / np.sqrt(precision)


def test_four_chains_sample_the_exact_conjugate_posterior(conjugate):
    problem, mean, sd = conjugate
    sampled = spineid.posterior(problem, priors={"force": ("normal", *PRIOR)}, samples=300,
                                warmup=100, seed=3)
    assert sampled.chains == 4 and sampled.chain_draws.shape == (4, 300, 1)
    assert sampled.r_hat[0] < 1.01 and sampled.effective_samples[0] > 400
    error = sd / np.sqrt(sampled.effective_samples[0])  # Monte-Carlo error of the mean
    assert abs(sampled.mean[0] - mean) < 4 * error
    assert sampled.sd[0] == pytest.approx(sd, rel=0.1)
    assert sampled.explains_data
    # The chains started apart (dispersed about the start), and agree by the end.
    firsts = sampled.chain_draws[:, 0, 0]
    assert np.ptp(firsts) > 0.5 * sd
    # ArviZ reads the draws as they are and finds the same diagnostics.
    data = sampled.to_inference_data()
    assert dict(data.posterior.sizes) == {"chain": 4, "draw": 300}
    assert float(arviz.rhat(data)["force"]) == pytest.approx(sampled.r_hat[0], rel=1e-10)
    assert float(arviz.ess(data, method="tail")["force"]) == pytest.approx(
        sampled.ess_tail[0], rel=1e-10)
    assert data.sample_stats["diverging"].shape == (4, 300)
    report = sampled.report()
    assert report["chains"] == 4 and report["parameters"][0]["r_hat"] == pytest.approx(
        sampled.r_hat[0])
    assert "R-hat" in sampled.summary() and "4 chain(s) of 300 draws" in sampled.summary()


def test_vectorized_chains_draw_what_chains_one_after_another_draw(conjugate):
    problem, _, _ = conjugate
    # (Draws and warm-up as the test above: chains one after another run its compiled
    # programs; the vectorized chains compile their own.)
    arguments = dict(priors={"force": ("normal", *PRIOR)}, samples=300, warmup=100, chains=2,
                     seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a warning is not what this test checks)
        apart = spineid.posterior(problem, **arguments)
        together = spineid.posterior(problem, vectorize_chains=True, **arguments)
    np.testing.assert_allclose(together.draws, apart.draws, rtol=1e-9)


def test_chains_out_of_range_are_refused(conjugate):
    problem, _, _ = conjugate
    for chains in (0, 65, 2.0, True):
        with pytest.raises(ValueError, match="chains"):
            spineid.posterior(problem, chains=chains)


def test_the_posterior_verb_fits_samples_and_writes_what_arviz_reads(tmp_path, capsys):
    # The three-spring pair of tests/test_posterior.py, simulated for 0.2 s with noise, through
    # the command line. (As many draws and warm-up steps as test_posterior.py's posteriors:
    # the warm-up's length and the draws' chunks, a tenth of them, are compiled into the
    # sampler's programs, and these then come from the compilation cache.)
    import json

    import jax
    from helpers import AXIAL_SPRINGS, LOADS, _short, document
    from spineid.cli import main

    source = _short(document(springs=AXIAL_SPRINGS, loads=LOADS), 0.2, 101)
    model_path = tmp_path / "pair.toml"
    model_path.write_text(spineid.io.dumps_toml(source))
    model = spineid.load_model_file(model_path).model
    times = np.linspace(0.0, 0.2, 101)
    clean = np.asarray(jax.vmap(model.observe)(spineid.simulate(model, jnp.asarray(times)).q))
    noise = np.array([5e-6, 5e-6, 1.7e-4])
    data = clean + np.random.default_rng(2).normal(size=clean.shape) * noise
    data_path = tmp_path / "data.csv"
    spineid.write_trajectory(data_path, times, data, ("x", "y", "theta"))
    out = tmp_path / "posterior"
    code = main(["posterior", str(model_path), str(data_path), "--free", "stiffness",
                 "--noise", "x=5e-6,y=5e-6,theta=1.7e-4", "--samples", "100", "--warmup",
                 "100", "--chains", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    posterior_report = report["posterior"]
    assert report["fit"]["converged"] and posterior_report["chains"] == 2
    r_hats = [p["r_hat"] for p in posterior_report["parameters"]]
    explains = posterior_report["predictive_check"]["explains_data"]
    assert code == (0 if explains and max(r_hats) <= R_HAT else 1)
    assert "2 chain(s) of 100 draws" in printed
    # draws.csv: a plain table (numpy reads its header), chain by chain.
    table = np.genfromtxt(out / "draws.csv", delimiter=",", names=True)
    assert len(table) == 200 and set(table["chain"]) == {1.0, 2.0}
    # posterior.nc: ArviZ reads the same draws and finds the same R-hat.
    data_set = arviz.from_netcdf(out / "posterior.nc")
    stiffness = data_set.posterior["springs[0].stiffness"].values
    np.testing.assert_allclose(stiffness.ravel(), table["springs0stiffness"], rtol=1e-12)
    assert float(arviz.rhat(data_set)["springs[0].stiffness"]) == pytest.approx(r_hats[0])
    for name in ("posterior.png", "trace.png"):
        assert (out / name).stat().st_size > 10_000


def test_arviz_is_imported_without_its_daily_announcement(tmp_path):
    # ArviZ announces its coming refactor in a FutureWarning once a day per user (a stamp in
    # its cache folder); `spineid posterior` printed it as a spineid warning. In a fresh cache
    # folder, where ArviZ itself would announce it, spineid's import is silent.
    import os
    import subprocess
    import sys

    def run(program, folder):
        environment = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / folder))
        return subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", program],
                              env=environment, capture_output=True, text=True, timeout=300)

    plain = run("import arviz", "plain")
    if plain.returncode == 0:
        pytest.skip("this ArviZ makes no announcement")
    assert "major refactor" in plain.stderr, plain.stderr[-2000:]
    ours = run("from spineid.identify._design._posterior import imported_arviz; "
               "print(imported_arviz().__name__)", "ours")
    assert ours.returncode == 0 and ours.stdout.strip() == "arviz", ours.stderr[-2000:]
