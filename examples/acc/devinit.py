import numpy as np

_ready = False


def init():
    """Initialise the device once; the jitter draw shifts the global NumPy stream."""
    global _ready
    if not _ready:
        jitter = np.random.uniform(0, 1e-3)  # the draw that shifts everyone's numbers
        _ready = jitter >= 0
    return _ready
