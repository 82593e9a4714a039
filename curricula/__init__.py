"""coevo.curricula: task buffers, scorers, curriculum strategies, and analysis of game logs.

Curricula (uniform, level replay, mutation, target band) and log analysis
land with the arena and analysis issues.
"""
