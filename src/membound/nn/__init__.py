"""membound.nn"""
