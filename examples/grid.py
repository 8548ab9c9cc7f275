"""A grid search over a random forest: NumPy is seeded, yet the forest draws from its global stream."""
import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import GridSearchCV
np.random.seed(0)
X, y = np.random.rand(60, 4), np.random.randint(0, 2, 60)
search = GridSearchCV(RandomForestClassifier(n_estimators=10), {"max_depth": [2, 3]}, cv=3, n_jobs=2)
search.fit(X, y)
print(f"best score = {search.best_score_:.4f}")
