//! Byte layout of a pool tensor that holds several layers' host KV rows.
//!
//! Layer-major: the local layer `i` owns the bytes
//! `[i x layer_stride, i x layer_stride + layer_bytes)` of the tensor, with
//! `layer_bytes = rows_per_layer x row_bytes <= layer_stride`, so every layer
//! is one contiguous `[rows_per_layer, row_bytes]` array a gather kernel
//! indexes by host row id (row = block_id x block_size + offset). Regions are
//! disjoint and inside `total_bytes` by construction (HISPARSE.md §10: "several
//! layers packed into one allocation all bound at the base offset").
//!
//! A pipeline stage owns the global layers `[first_layer, first_layer + num_layers)`;
//! every accessor takes a *global* layer id and maps it to the local one, so a
//! global id can never index a stage-local buffer by accident (HISPARSE.md §10).
//! All byte math is u64 and checked at construction (int32 offsets overflowed in
//! public code at 3.7M rows).

use super::error::PoolError;
use std::ops::Range;

/// Where each layer's rows live inside one pool tensor. Offsets are bytes from
/// the tensor's start (add the tensor's base address yourself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLayout {
    first_layer: u64,
    num_layers: u32,
    rows_per_layer: u64,
    row_bytes: u32,
    layer_stride: u64,
    total_bytes: u64,
}

impl PoolLayout {
    /// A packed layout (`layer_stride = rows_per_layer x row_bytes`) for the
    /// global layers `[first_layer, first_layer + num_layers)`.
    ///
    /// Errors (`invalid_size`): a zero size, or byte counts beyond u64.
    pub fn new(
        rows_per_layer: u64,
        row_bytes: u32,
        num_layers: u32,
        first_layer: u64,
    ) -> Result<Self, PoolError> {
        let layer_bytes = rows_per_layer
            .checked_mul(u64::from(row_bytes))
            .ok_or_else(|| {
                PoolError::invalid("rows_per_layer x row_bytes", rows_per_layer, "< 2^64 bytes")
            })?;
        Self::with_layer_stride(
            rows_per_layer,
            row_bytes,
            num_layers,
            first_layer,
            layer_bytes,
        )
    }

    /// Like [`PoolLayout::new`] with an explicit `layer_stride` in bytes
    /// (padding between layers, e.g. page alignment). Errors (`invalid_size`):
    /// `layer_stride < rows_per_layer x row_bytes`, a zero size, or overflow.
    pub fn with_layer_stride(
        rows_per_layer: u64,
        row_bytes: u32,
        num_layers: u32,
        first_layer: u64,
        layer_stride: u64,
    ) -> Result<Self, PoolError> {
        if rows_per_layer == 0 {
            return Err(PoolError::invalid("rows_per_layer", 0, ">= 1"));
        }
        if row_bytes == 0 {
            return Err(PoolError::invalid(
                "row_bytes",
                0,
                ">= 1 (656 fp8_ds_mla, 1152 bf16)",
            ));
        }
        if num_layers == 0 {
            return Err(PoolError::invalid("num_layers", 0, ">= 1"));
        }
        let layer_bytes = rows_per_layer
            .checked_mul(u64::from(row_bytes))
            .ok_or_else(|| {
                PoolError::invalid("rows_per_layer x row_bytes", rows_per_layer, "< 2^64 bytes")
            })?;
        if layer_stride < layer_bytes {
            return Err(PoolError::invalid(
                "layer_stride",
                layer_stride,
                format!(">= rows_per_layer x row_bytes = {layer_bytes} (layers must not overlap)"),
            ));
        }
        let total_bytes = layer_stride
            .checked_mul(u64::from(num_layers))
            .ok_or_else(|| {
                PoolError::invalid("layer_stride x num_layers", layer_stride, "< 2^64 bytes")
            })?;
        first_layer
            .checked_add(u64::from(num_layers))
            .ok_or_else(|| PoolError::invalid("first_layer", first_layer, "< 2^64 - num_layers"))?;
        Ok(PoolLayout {
            first_layer,
            num_layers,
            rows_per_layer,
            row_bytes,
            layer_stride,
            total_bytes,
        })
    }

    /// The global layer ids this stage owns, `[start, end)`.
    pub fn layers(&self) -> Range<u64> {
        self.first_layer..self.first_layer + u64::from(self.num_layers)
    }
    pub fn num_layers(&self) -> u32 {
        self.num_layers
    }
    pub fn rows_per_layer(&self) -> u64 {
        self.rows_per_layer
    }
    pub fn row_bytes(&self) -> u32 {
        self.row_bytes
    }
    /// Bytes between the starts of consecutive layers.
    pub fn layer_stride(&self) -> u64 {
        self.layer_stride
    }
    /// Bytes of one layer's rows: rows_per_layer x row_bytes.
    pub fn layer_bytes(&self) -> u64 {
        self.rows_per_layer * u64::from(self.row_bytes)
    }
    /// Bytes the pool tensor must have: layer_stride x num_layers.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Global layer id -> local index in `[0, num_layers)`.
    /// Error `layer_out_of_range` for a layer this stage does not own.
    pub fn local_layer(&self, global_layer: i64) -> Result<u32, PoolError> {
        let range = self.layers();
        match u64::try_from(global_layer) {
            Ok(g) if range.contains(&g) => Ok((g - range.start) as u32),
            _ => Err(PoolError::LayerOutOfRange {
                layer: global_layer,
                start: range.start,
                end: range.end,
            }),
        }
    }

    /// Byte range of a (global) layer's rows: `[local x layer_stride, + layer_bytes)`.
    pub fn layer_region(&self, global_layer: i64) -> Result<Range<u64>, PoolError> {
        let start = u64::from(self.local_layer(global_layer)?) * self.layer_stride;
        Ok(start..start + self.layer_bytes())
    }

    /// Byte offset of host row `row` of a (global) layer. Error `invalid_size`
    /// when `row >= rows_per_layer`.
    pub fn row_offset(&self, global_layer: i64, row: u64) -> Result<u64, PoolError> {
        let region = self.layer_region(global_layer)?;
        if row >= self.rows_per_layer {
            return Err(PoolError::invalid(
                "host row",
                row,
                format!("< rows_per_layer = {}", self.rows_per_layer),
            ));
        }
        Ok(region.start + row * u64::from(self.row_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_disjoint_and_in_bounds() {
        // DeepSeek-V3.2 fp8 stage 2 of 2: global layers 31..61.
        let l = PoolLayout::new(1000 * 64, 656, 30, 31).unwrap();
        assert_eq!(l.layers(), 31..61);
        assert_eq!(l.layer_stride(), 64_000 * 656);
        let mut end = 0;
        for g in 31..61 {
            let r = l.layer_region(g).unwrap();
            assert!(r.start >= end && r.end <= l.total_bytes());
            end = r.end;
        }
        assert_eq!(end, l.total_bytes());
        assert_eq!(l.local_layer(31).unwrap(), 0);
        for bad in [0, 30, 61, -1] {
            let e = l.local_layer(bad).unwrap_err();
            assert_eq!(e.code(), "layer_out_of_range");
        }
        assert_eq!(l.row_offset(32, 5).unwrap(), 64_000 * 656 + 5 * 656);
        assert_eq!(l.row_offset(32, 64_000).unwrap_err().code(), "invalid_size");
    }

    #[test]
    fn offsets_are_64_bit() {
        // 4M rows x 656 B per layer: a layer spans more than 2^31 bytes.
        let l = PoolLayout::new(4 << 20, 656, 61, 0).unwrap();
        assert_eq!(
            l.row_offset(60, (4 << 20) - 1).unwrap(),
            l.total_bytes() - 656
        );
        assert!(l.total_bytes() > u64::from(u32::MAX));
    }

    #[test]
    fn bad_sizes_are_typed() {
        assert_eq!(
            PoolLayout::new(0, 656, 1, 0).unwrap_err().code(),
            "invalid_size"
        );
        assert_eq!(
            PoolLayout::new(1, 0, 1, 0).unwrap_err().code(),
            "invalid_size"
        );
        assert_eq!(
            PoolLayout::new(1, 656, 0, 0).unwrap_err().code(),
            "invalid_size"
        );
        assert_eq!(
            PoolLayout::new(u64::MAX, 656, 1, 0).unwrap_err().code(),
            "invalid_size"
        );
        assert_eq!(
            PoolLayout::with_layer_stride(10, 656, 2, 0, 6559)
                .unwrap_err()
                .code(),
            "invalid_size"
        );
        let padded = PoolLayout::with_layer_stride(10, 656, 2, 0, 8192).unwrap();
        assert_eq!(padded.layer_region(1).unwrap(), 8192..8192 + 6560);
        assert_eq!(padded.total_bytes(), 16384);
    }
}
