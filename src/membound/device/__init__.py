"""membound.device"""
