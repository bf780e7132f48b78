/* delta_codec.c: being written. */
