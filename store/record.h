/*
 * The store record (record.c): the model a directory is for, as JSON.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_RECORD_H
#define KVRT_STORE_RECORD_H

#include "model.h"

char *store_record_text(const struct store_model *m);
/* KVRT_OK when the record is for m; else a refusal naming the field. */
int store_record_compare(const char *text, size_t len, const struct store_model *m, const char *path);
/* The model a record describes (inspecting a directory). */
int store_record_model(const char *text, size_t len, const char *path, struct store_model *out);

#endif
