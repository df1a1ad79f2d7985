"""membound.kernels"""
