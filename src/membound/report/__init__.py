"""membound.report"""
