"""membound.analysis"""
