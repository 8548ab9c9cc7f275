"""Clustering with scikit-learn: seeded once at the top, and three calls that draw from NumPy's global stream."""
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.model_selection import train_test_split

from rngtrace import rng_trace

with rng_trace():
    np.random.seed(0)
    X = np.random.normal(size=(200, 2))
    X_train, X_test = train_test_split(X)                                  # no random_state
    labels = KMeans(n_clusters=3, n_init=1).fit_predict(X_train)           # no random_state
    score = silhouette_score(X_train, labels, sample_size=50)              # no random_state
    noise = np.random.normal(size=3)
