"""Prints an NPY file as numpy reads it: its values as a Python list (numpy.load(PATH).tolist()).

    print_npy.py PATH
"""
import sys

import numpy as np

print(np.load(sys.argv[1]).tolist())
