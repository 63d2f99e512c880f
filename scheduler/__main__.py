"""python -m scheduler"""
from scheduler.main import main

main()
