"""A launcher that runs each fold as its own Python process: rngtrace run folds.py"""
import subprocess
import sys

for fold in range(2):
    subprocess.run([sys.executable, "fold.py", str(fold)], check=True)
