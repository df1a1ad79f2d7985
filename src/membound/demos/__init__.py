"""membound.demos"""
