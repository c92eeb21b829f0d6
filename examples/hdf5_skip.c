/*
 * hdf5_skip.c - a hang inside a real third-party MPI library: parallel HDF5
 * (Debian's libhdf5-openmpi-dev, on Debian's Open MPI), where the last rank
 * skips a collective HDF5 call that the others make.
 *
 * Ranks (>= 2, harness default 4): every rank creates one file together
 * (H5Fcreate with the MPI-IO driver, H5Pset_fapl_mpio on MPI_COMM_WORLD) and
 * one dataset of size doubles per rank, chunked so that its space is
 * allocated at the first write (H5Dcreate2, collective). Then:
 *   - ranks 0..size-2 call write_field(): H5Dwrite of their row with a
 *     collective transfer property list (H5Pset_dxpl_mpio,
 *     H5FD_MPIO_COLLECTIVE), which every rank of the file must make;
 *   - rank size-1 skips it and calls finish(): H5Dclose, then H5Fclose,
 *     collective too.
 * Each rank prints READY right before that call (the line marked
 * "mpiq: write" or "mpiq: close") and stays in it: the two collective calls
 * never meet inside HDF5. Where they wait in MPI is HDF5's business (Debian's
 * HDF5 1.10.8 on Open MPI 4.1.4: the writers in MPI_Allreduce, called from
 * HDF5's collective chunk I/O; the closing rank in MPI_Barrier or
 * MPI_File_close's collective), which is the point: the application's own
 * calls are H5Dwrite in write_field and H5Fclose in finish.
 *
 * No queues: Debian's Open MPI has no message queue debugging support
 * installed (stacks only). Designed verdict: deadlock, by the stall rule
 * (every rank blocked in MPI, nothing changed between two samples). The file
 * is made under $TMPDIR (default /tmp) with rank 0's pid in its name and
 * unlinked at once (the ranks keep it open).
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mpiq_example.h"

static void write_field(hid_t dset, int rank, int size)
{
    double row[64];
    hsize_t start[2] = {(hsize_t)rank, 0}, count[2] = {1, (hsize_t)size};
    for (int i = 0; i < size && i < 64; i++)
        row[i] = rank * 100.0 + i;
    hid_t file_space = H5Dget_space(dset);
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t mem_space = H5Screate_simple(2, count, NULL);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE);
    mpiq_ready(rank);
    H5Dwrite(dset, H5T_NATIVE_DOUBLE, mem_space, file_space, xfer, row); /* mpiq: write */
    H5Pclose(xfer);
    H5Sclose(mem_space);
    H5Sclose(file_space);
}

static void finish(hid_t file, hid_t dset, int rank)
{
    H5Dclose(dset);
    mpiq_ready(rank);
    H5Fclose(file); /* mpiq: close */
}

int main(int argc, char **argv)
{
    int rank, size;
    mpiq_init_world(&argc, &argv, "hdf5_skip", 2, 64, &rank, &size);

    char path[4096];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/mpiq-hdf5-skip-%d.h5", dir && *dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (file < 0) {
        fprintf(stderr, "hdf5_skip: cannot create %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        unlink(path);

    hsize_t dims[2] = {(hsize_t)size, (hsize_t)size};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[2] = {1, (hsize_t)size};
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t dset = H5Dcreate2(file, "field", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);

    if (rank < size - 1)
        write_field(dset, rank, size);
    else
        finish(file, dset, rank);
    /* Not reached while the last rank skips the write. */
    mpiq_wait_forever();
    return 0;
}
