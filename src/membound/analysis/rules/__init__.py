"""membound.analysis.rules"""
