"""membound.trace"""
