"""A toy engine as one folder, for tests/logs/test_engine_table.py only: what a third-party engine
brings (its row, its parser, its rules), found through one entry point of the group
`llm_doctor.engine` that the test installs as a temporary distribution."""
