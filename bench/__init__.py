"""clueue bench: scenario generation, the greedy reference, cycle benchmarks and replay."""
