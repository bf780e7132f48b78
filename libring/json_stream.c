/* json_stream.c: being written. */
