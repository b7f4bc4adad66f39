//! Integration tests: mock_server.
