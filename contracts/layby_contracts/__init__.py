"""The shared vocabulary of Layby's services: events, commands, HTTP bodies, names and caps.

Services import this package and ``layby`` (the libraries), never each other.
"""
