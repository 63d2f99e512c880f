"""python -m kubelet.runtime"""
from kubelet.runtime.server import main

main()
