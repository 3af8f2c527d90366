"""The paper reproductions (mobidfl reproduce) at CI scale."""
