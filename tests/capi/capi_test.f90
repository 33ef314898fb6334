! SPDX-License-Identifier: Apache-2.0
! The C API from Fortran through iso_c_binding (tierflow/tierflow_c.h): a pipe between two
! memory locators, a file written and read back, an engine copy, and a bad input answered with
! a code and a message. Exit status 0 when every check holds.
module tierflow_c
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int), parameter :: TF_OK = 0, TF_INVALID_ARGUMENT = 1
  integer(c_int), parameter :: TF_FILE_READ = 0, TF_FILE_CREATE = 1, TF_OP_COPY = 0

  type, bind(c) :: tf_operation
    integer(c_int) :: kind
    type(c_ptr) :: dst, dst2, src, src2
    integer(c_int64_t) :: size, pattern
    integer(c_int32_t) :: crc_seed
  end type

  interface
    function tf_runtime_create(options, out) bind(c)
      import :: c_int, c_ptr
      type(c_ptr), value :: options
      type(c_ptr) :: out
      integer(c_int) :: tf_runtime_create
    end function
    subroutine tf_runtime_free(runtime) bind(c)
      import :: c_ptr
      type(c_ptr), value :: runtime
    end subroutine
    function tf_locator_parse(runtime, spec, mode, default_size, out) bind(c)
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: runtime
      character(kind=c_char), dimension(*) :: spec
      integer(c_int), value :: mode
      integer(c_int64_t), value :: default_size
      type(c_ptr) :: out
      integer(c_int) :: tf_locator_parse
    end function
    subroutine tf_locator_free(locator) bind(c)
      import :: c_ptr
      type(c_ptr), value :: locator
    end subroutine
    function tf_locator_data(locator) bind(c)
      import :: c_ptr
      type(c_ptr), value :: locator
      type(c_ptr) :: tf_locator_data
    end function
    function tf_pipe_connect(runtime, from, to, options, out) bind(c)
      import :: c_int, c_ptr
      type(c_ptr), value :: runtime, from, to, options
      type(c_ptr) :: out
      integer(c_int) :: tf_pipe_connect
    end function
    function tf_pipe_transfer(pipe, src_offset, dst_offset, length) bind(c)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: pipe
      integer(c_int64_t), value :: src_offset, dst_offset, length
      integer(c_int) :: tf_pipe_transfer
    end function
    subroutine tf_pipe_free(pipe) bind(c)
      import :: c_ptr
      type(c_ptr), value :: pipe
    end subroutine
    function tf_cpu_engine_create(node, workers, out) bind(c)
      import :: c_int, c_ptr
      integer(c_int), value :: node, workers
      type(c_ptr) :: out
      integer(c_int) :: tf_cpu_engine_create
    end function
    subroutine tf_engine_free(engine) bind(c)
      import :: c_ptr
      type(c_ptr), value :: engine
    end subroutine
    function tf_engine_submit(engine, ops, count, callback, user, out) bind(c)
      import :: c_int, c_ptr, c_size_t, c_funptr, tf_operation
      type(c_ptr), value :: engine
      type(tf_operation), intent(in) :: ops
      integer(c_size_t), value :: count
      type(c_funptr), value :: callback
      type(c_ptr), value :: user
      type(c_ptr) :: out
      integer(c_int) :: tf_engine_submit
    end function
    function tf_handle_wait(handle) bind(c)
      import :: c_int, c_ptr
      type(c_ptr), value :: handle
      integer(c_int) :: tf_handle_wait
    end function
    subroutine tf_handle_free(handle) bind(c)
      import :: c_ptr
      type(c_ptr), value :: handle
    end subroutine
    function tf_last_error() bind(c)
      import :: c_ptr
      type(c_ptr) :: tf_last_error
    end function
    function c_mkdtemp(template) bind(c, name="mkdtemp")
      import :: c_ptr, c_char
      character(kind=c_char), dimension(*) :: template
      type(c_ptr) :: c_mkdtemp
    end function
    function c_rmdir(path) bind(c, name="rmdir")
      import :: c_int, c_char
      character(kind=c_char), dimension(*) :: path
      integer(c_int) :: c_rmdir
    end function
    function c_strlen(s) bind(c, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function
  end interface

contains

  ! The calling thread's last error as a Fortran string.
  function last_error() result(text)
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: i, n
    p = tf_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: text)
    do i = 1, n
      text(i:i) = chars(i)
    end do
  end function

end module

program capi_test
  use tierflow_c
  implicit none
  integer, parameter :: n = 1048576
  type(c_ptr) :: rt, a, b, file, back, pipe, engine, handle, bad
  integer(c_int8_t), pointer :: src(:), dst(:)
  integer(c_int8_t), allocatable, target :: x(:), y(:)
  type(tf_operation) :: op
  character(kind=c_char, len=32) :: dir
  character(len=:), allocatable :: path
  integer :: i, failures, status

  failures = 0
  rt = c_null_ptr
  call check(tf_runtime_create(c_null_ptr, rt) == TF_OK, "tf_runtime_create")

  ! Flavour (a) between two memory locators, their bytes seen from Fortran.
  call check(tf_locator_parse(rt, "dram:0:1MiB" // c_null_char, TF_FILE_CREATE, 0_c_int64_t, &
                              a) == TF_OK, "parse a")
  call check(tf_locator_parse(rt, "dram:0:1MiB" // c_null_char, TF_FILE_CREATE, 0_c_int64_t, &
                              b) == TF_OK, "parse b")
  call c_f_pointer(tf_locator_data(a), src, [n])
  call c_f_pointer(tf_locator_data(b), dst, [n])
  do i = 1, n
    src(i) = int(mod(i * 7, 127), c_int8_t)
  end do
  dst = 0
  call check(tf_pipe_connect(rt, a, b, c_null_ptr, pipe) == TF_OK, "connect")
  call check(tf_pipe_transfer(pipe, 0_c_int64_t, 0_c_int64_t, int(n, c_int64_t)) == TF_OK, &
             "transfer")
  call check(all(src == dst), "memory to memory: the bytes arrived")
  call tf_pipe_free(pipe)

  ! A file written through a pipe, then read back through another.
  ! In a directory of its own (mkdtemp), never a fixed name in a shared one.
  dir = "/tmp/tierflow-capi-f-XXXXXX" // c_null_char
  if (.not. c_associated(c_mkdtemp(dir))) error stop "mkdtemp failed"
  path = dir(1:index(dir, c_null_char) - 1) // "/fortran.bin"
  call check(tf_locator_parse(rt, "file:" // path // ":0:1MiB" // c_null_char, TF_FILE_CREATE, &
                              0_c_int64_t, file) == TF_OK, "file locator")
  call check(tf_pipe_connect(rt, a, file, c_null_ptr, pipe) == TF_OK, "connect to the file")
  call check(tf_pipe_transfer(pipe, 0_c_int64_t, 0_c_int64_t, int(n, c_int64_t)) == TF_OK, &
             "write the file")
  call tf_pipe_free(pipe)
  dst = 0
  call check(tf_locator_parse(rt, "file:" // path // c_null_char, TF_FILE_READ, 0_c_int64_t, &
                              back) == TF_OK, "read locator")
  call check(tf_pipe_connect(rt, back, b, c_null_ptr, pipe) == TF_OK, "connect from the file")
  call check(tf_pipe_transfer(pipe, 0_c_int64_t, 0_c_int64_t, int(n, c_int64_t)) == TF_OK, &
             "read the file")
  call check(all(src == dst), "the file holds what was written")
  call tf_pipe_free(pipe)
  call tf_locator_free(back)
  call tf_locator_free(file)
  open(unit=9, file=path, status="old", iostat=status)
  if (status == 0) close(9, status="delete")
  call check(c_rmdir(dir) == 0, "the directory removed")

  ! An engine copy between Fortran arrays.
  allocate(x(n), y(n))
  x = 5
  y = 0
  call check(tf_cpu_engine_create(0_c_int, 1_c_int, engine) == TF_OK, "cpu engine")
  op = tf_operation(TF_OP_COPY, c_loc(y), c_null_ptr, c_loc(x), c_null_ptr, int(n, c_int64_t), &
                    0_c_int64_t, 0_c_int32_t)
  call check(tf_engine_submit(engine, op, 1_c_size_t, c_null_funptr, c_null_ptr, handle) &
             == TF_OK, "submit")
  call check(tf_handle_wait(handle) == TF_OK, "wait")
  call tf_handle_free(handle)
  call check(all(x == y), "engine copy")
  call tf_engine_free(engine)

  ! A bad locator: a code and a message that names what is wrong.
  call check(tf_locator_parse(rt, "tape:0" // c_null_char, TF_FILE_READ, 0_c_int64_t, bad) &
             == TF_INVALID_ARGUMENT, "a bad locator is refused")
  call check(index(last_error(), "tape") > 0, "the message names it: " // last_error())

  call tf_locator_free(b)
  call tf_locator_free(a)
  call tf_runtime_free(rt)
  if (failures /= 0) then
    print '(a, i0, a)', "capi_fortran_test: ", failures, " check(s) failed"
    error stop 1
  end if
  print '(a)', "capi_fortran_test: every check held"

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      print '(a, a, a, a)', "FAILED: ", what, "; last error: ", last_error()
    end if
  end subroutine

end program
