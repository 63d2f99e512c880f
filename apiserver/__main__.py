"""python -m apiserver"""
from apiserver.server import main

main()
