"""membound.cost"""
