"""membound.data"""
