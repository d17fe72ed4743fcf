"""placeholder"""
from ._tdist import *  # noqa
