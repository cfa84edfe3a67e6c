"""Live conformance harness: lafuse vs Apache SystemDS 3.4.0 on a corpus of DML scripts."""
