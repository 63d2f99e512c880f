"""python -m controllers"""
from controllers.main import main

main()
