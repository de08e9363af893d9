"""bayeval: evaluate language models with fewer evaluations.

Per-item scores of earlier models (a reference :class:`~bayeval.data.ScoreMatrix`) feed a
generative model of scores; acquisition rules choose the next items for a new model,
stopping rules say when the estimate is good enough, and estimators report the score with
an interval.
"""

import jax

# Posterior algebra (rank-1 updates over thousands of steps) needs float64; JAX defaults
# to float32 unless this is set before the first array is made.
jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"
