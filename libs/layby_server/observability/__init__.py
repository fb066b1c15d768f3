"""Logs, metrics, gauges, traces and the health port."""
