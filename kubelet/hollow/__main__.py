"""python -m kubelet.hollow"""
from kubelet.hollow.main import main

main()
