import os
import pathlib

import jax

# The suite's compiled programs go to a cache of its own (spineid/_cache.py), shared by the
# test workers of one run and by later runs, never to the user's cache directory.
os.environ.setdefault("SPINEID_CACHE_DIR",
                      str(pathlib.Path(__file__).parent.parent / ".pytest_cache" / "jax"))

jax.config.update("jax_enable_x64", True)
