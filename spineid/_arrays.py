"""Host values onto the device without running a compiled program.

Outside `jit`, `jnp.asarray` of a host value (a Python number, a list, a numpy array) runs a
small compiled program (`jit(stage)` or `jit(convert_element_type)`) the first time each shape
and dtype is seen in a process, as does every eager `jnp` operation: 10-50 ms each in a new
process (lowering, then a compilation-cache load). Building a model from its file, a fit problem
from data and a fit's report ran about forty of them. `floats` copies host values with
`jax.device_put` instead (no program); traced values go through `jnp.asarray` as before.
"""

import jax
import jax.numpy as jnp
import numpy as np


def floats(value) -> jax.Array:
    """`value` (any shape; a number, nested lists, a numpy or JAX array, or a tracer) as a
    float64 JAX array (strongly typed), without a compiled program where `value` is on the
    host."""
    if isinstance(value, jax.core.Tracer):
        return jnp.asarray(value, dtype=float)
    if isinstance(value, jax.Array) and value.dtype == np.float64 and not value.weak_type:
        return value
    return jax.device_put(np.asarray(value, dtype=np.float64))


def traced(*values) -> bool:
    """Whether any leaf of `values` is a tracer (inside `jit`, `vmap`, `grad`)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(values))
