"""python -m kubelet"""
from kubelet.main import main

main()
